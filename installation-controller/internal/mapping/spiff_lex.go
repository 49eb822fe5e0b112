package mapping

import (
	"fmt"
	"strconv"
	"strings"
)

// tokKind is the kind of a token of a Spiff expression.
type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokInt
	tokFloat
	tokString
	tokOp
)

// token is one lexeme; pos is its byte offset in the expression and space
// says whether whitespace precedes it (Spiff separates juxtaposed operands
// and indexes by it: `a[0]` indexes, `a [0]` concatenates a list).
type token struct {
	kind  tokKind
	text  string
	pos   int
	space bool
	str   string
	num   int64
	flt   float64
}

// syntaxError is an expression outside the supported Spiff subset or one
// that does not parse; pos is the byte offset in the expression.
type syntaxError struct {
	pos int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("at offset %d: %s", e.pos, e.msg) }

func errAt(pos int, format string, args ...any) error {
	return &syntaxError{pos: pos, msg: fmt.Sprintf(format, args...)}
}

// operators, longest first so that `<=` wins over `<`.
var operators = []string{"-and", "-or", "||", "&&", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}",
	",", "=", ".", "+", "-", "*", "/", "%", "<", ">", "!", "?", ":", "~"}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c == '-' || (c >= '0' && c <= '9') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits src[from:] into tokens; positions are offsets in src, so that
// errors count from the start of the string as the user wrote it.
func lex(src string, from int) ([]token, error) {
	var toks []token
	for i := from; ; {
		start := i
		for i < len(src) && strings.IndexByte(" \t\r\n", src[i]) >= 0 {
			i++
		}
		space := i > start || i == from
		if i == len(src) {
			return append(toks, token{kind: tokEOF, pos: i, space: space}), nil
		}
		t, err := lexOne(src, i, prevAllowsSign(toks, space))
		if err != nil {
			return nil, err
		}
		t.space = space
		toks = append(toks, t)
		i += len(t.text)
	}
}

// prevAllowsSign says whether a `-` directly before a digit is a number's
// sign: after whitespace, at the start or after an opening bracket, an
// operator or a separator, not right after an operand (`a-1` is a name).
func prevAllowsSign(toks []token, space bool) bool {
	if space || len(toks) == 0 {
		return true
	}
	last := toks[len(toks)-1]
	return last.kind == tokOp && last.text != ")" && last.text != "]" && last.text != "}"
}

func lexOne(src string, i int, signOK bool) (token, error) {
	c := src[i]
	switch {
	case isIdentStart(c):
		j := i + 1
		for j < len(src) && isIdentPart(src[j]) {
			j++
		}
		return token{kind: tokIdent, text: src[i:j], pos: i}, nil
	case isDigit(c), c == '-' && signOK && i+1 < len(src) && isDigit(src[i+1]):
		return lexNumber(src, i)
	case c == '"':
		return lexString(src, i)
	}
	for _, op := range operators {
		if strings.HasPrefix(src[i:], op) {
			if (op == "-and" || op == "-or") && i+len(op) < len(src) && isIdentPart(src[i+len(op)]) {
				continue
			}
			return token{kind: tokOp, text: op, pos: i}, nil
		}
	}
	if c == '|' {
		return token{}, errAt(i, "unexpected character '|' (lambda and mapping expressions are not supported)")
	}
	return token{}, errAt(i, "unexpected character %q", rune(c))
}

func lexNumber(src string, i int) (token, error) {
	j := i + 1
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	isFloat := false
	if j+1 < len(src) && src[j] == '.' && isDigit(src[j+1]) {
		isFloat = true
		j += 2
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	text := src[i:j]
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return token{}, errAt(i, "number %s: %v", text, err)
		}
		return token{kind: tokFloat, text: text, pos: i, flt: f}, nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return token{}, errAt(i, "integer %s does not fit in 64 bits", text)
	}
	return token{kind: tokInt, text: text, pos: i, num: n}, nil
}

// lexString reads a double-quoted string with the escapes \" \\ \n \t \r.
func lexString(src string, i int) (token, error) {
	var b strings.Builder
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '"':
			return token{kind: tokString, text: src[i : j+1], pos: i, str: b.String()}, nil
		case '\\':
			if j+1 == len(src) {
				return token{}, errAt(j, "unterminated escape in string")
			}
			j++
			esc, ok := map[byte]byte{'"': '"', '\\': '\\', 'n': '\n', 't': '\t', 'r': '\r'}[src[j]]
			if !ok {
				return token{}, errAt(j-1, "unknown escape \\%c in string", src[j])
			}
			b.WriteByte(esc)
		default:
			b.WriteByte(src[j])
		}
	}
	return token{}, errAt(i, "unterminated string")
}
