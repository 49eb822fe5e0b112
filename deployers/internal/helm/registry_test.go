package helm

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCappedBodyReadsUpToTheLimit(t *testing.T) {
	read := func(body string, limit int64) ([]byte, error) {
		return io.ReadAll(&cappedBody{body: io.NopCloser(strings.NewReader(body)), left: limit, limit: limit, flag: "max-chart-bytes"})
	}
	if data, err := read("12345", 5); err != nil || string(data) != "12345" {
		t.Errorf("a body of exactly the limit: %q, %v", data, err)
	}
	var large *tooLargeError
	if _, err := read("123456", 5); !errors.As(err, &large) || !strings.Contains(err.Error(), "(--max-chart-bytes)") {
		t.Errorf("a body over the limit: %v", err)
	}
}
