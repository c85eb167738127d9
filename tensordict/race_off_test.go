//go:build !race

package tensordict

// raceBuild is true in builds with the race detector.
const raceBuild = false
