package codec

// Default limits of Decode; see Limits.
const (
	DefaultMaxDepth         = 1000
	DefaultMaxEntries       = 1 << 20
	DefaultMaxMetadataBytes = 256 << 20
)

// MaxValueDepth bounds the nesting of non-tensor values the writer
// encodes (and tensordict stores), so that encoding can never recurse
// without end.
const MaxValueDepth = 1000

// MaxKeyParts bounds the key parts, summed over the leaves, of the
// structure of metadata from outside: a million leaves a thousand levels
// deep, say, would otherwise cost a billion parts (16 GB of keys).
const MaxKeyParts = 1 << 24

// Limits bound what decoding metadata from a file or a peer may cost.
// Exceeding one is an error that matches wire.ErrLimit (which tensordict
// exports as ErrLimit) with errors.Is.
type Limits struct {
	MaxDepth         int // JSON nesting depth
	MaxEntries       int // leaves, nested TensorDicts and non-tensor values, in all
	MaxMetadataBytes int // length of the JSON
}

// DefaultLimits returns the limits tensordict uses unless told otherwise.
func DefaultLimits() Limits {
	return Limits{MaxDepth: DefaultMaxDepth, MaxEntries: DefaultMaxEntries, MaxMetadataBytes: DefaultMaxMetadataBytes}
}
