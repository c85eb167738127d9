package memmap

// Option configures the constructors of this package.
type Option func(*options)

type options struct {
	existsOK  bool
	private   bool
	hardLinks bool
}

// ExistsOK lets FromTensor, Empty, Zeros and Full overwrite an existing
// regular file (tensordict's existsok=True). The new content is written
// under a temporary name in the same directory and renamed over the old
// file, so the file changes all at once and tensors still mapping the old
// file keep their content. Without ExistsOK a file is created exclusively
// (O_CREAT|O_EXCL), and an existing one is an error wrapping fs.ErrExist.
// A symbolic link is refused either way.
func ExistsOK() Option { return func(o *options) { o.existsOK = true } }

// Private makes FromFile map the file copy-on-write (MAP_PRIVATE) even when it
// is writable: the tensor can be modified, but the changes stay in this
// process and never reach the file.
func Private() Option { return func(o *options) { o.private = true } }

// HardLinks lets FromFile map shared a file that has more than one name
// (hard link). Without it such a file is mapped only copy-on-write
// (Private), since writes through a shared mapping would change the file
// behind every other name too: in a directory from someone else, a leaf
// may be a link to a file of the user's that it does not name.
func HardLinks() Option { return func(o *options) { o.hardLinks = true } }

func collect(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
