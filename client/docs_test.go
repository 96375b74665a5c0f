package client_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsTheExample: the Go program of the README's quickstart is
// Example (which go test runs against the real server) verbatim, with the
// output it checks.
func TestReadmeShowsTheExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, ok := strings.Cut(string(src), "\nfunc Example() {\n")
	if !ok {
		t.Fatal("no func Example in example_test.go")
	}
	body, output, ok := strings.Cut(fn, "\t// Output:\n")
	if !ok {
		t.Fatal("Example has no output")
	}
	output, _, _ = strings.Cut(output, "}\n")
	var want strings.Builder
	want.WriteString("func main() {\n" + body + "}\n")
	for line := range strings.SplitSeq(strings.TrimRight(output, "\n"), "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t") + "\n")
	}
	if !strings.Contains(string(readme), want.String()) {
		t.Errorf("README.md does not show Example as its Go quickstart; it should contain:\n%s", want.String())
	}
}
