package jsonesc_test

import (
	"fmt"

	"github.com/tdmpi/tdmpi/internal/jsonesc"
)

func ExampleAppendString() {
	fmt.Println(string(jsonesc.AppendString(nil, "café \"x\"", false)))
	fmt.Println(string(jsonesc.AppendString(nil, "café \"x\"", true)))
	// Output:
	// "café \"x\""
	// "caf\u00e9 \"x\""
}
