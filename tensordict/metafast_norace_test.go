//go:build !race

package tensordict

// raceEnabled reports whether the race detector is on; timing tests skip
// under it, which slows everything several times over.
const raceEnabled = false
