package mapping

import (
	"fmt"
	"strings"
)

// expr is a parsed Spiff expression.
type expr interface{ position() int }

type (
	literalExpr struct {
		pos int
		val any // string, int64, float64, bool or nil
	}
	// refExpr is an import (or export) and a path into it: each step is a
	// field name (string) or a list index (int).
	refExpr struct {
		pos   int
		name  string
		steps []any
	}
	listExpr struct {
		pos   int
		elems []expr
	}
	mapExpr struct {
		pos        int
		keys, vals []expr
	}
	unaryExpr struct {
		pos int
		op  string
		x   expr
	}
	binaryExpr struct {
		pos  int
		op   string
		l, r expr
	}
	condExpr struct {
		pos               int
		cond, then, else_ expr
	}
	concatExpr struct {
		pos   int
		parts []expr
	}
)

func (e *literalExpr) position() int { return e.pos }
func (e *refExpr) position() int     { return e.pos }
func (e *listExpr) position() int    { return e.pos }
func (e *mapExpr) position() int     { return e.pos }
func (e *unaryExpr) position() int   { return e.pos }
func (e *binaryExpr) position() int  { return e.pos }
func (e *condExpr) position() int    { return e.pos }
func (e *concatExpr) position() int  { return e.pos }

// keywords are Spiff operators this subset does not implement; naming one
// is refused rather than read as an import of that name.
var keywords = map[string]string{
	"merge":   "merging with a stub",
	"auto":    "automatic values",
	"lambda":  "lambda expressions",
	"inline":  "inline merging",
	"replace": "replacing merges",
}

// parser is a recursive descent over Spiff's precedence levels, lowest
// first: `||`, `?:`, juxtaposition, `-or`/`-and`, comparison, `+ -`,
// `* / %`, then unary operators and operands.
type parser struct {
	toks  []token
	i     int
	depth int
}

// parseSpiff parses src[from:], the text between `((` and `))`.
func parseSpiff(src string, from int) (expr, error) {
	if n := len(src) - from; n > MaxExpressionBytes {
		return nil, fmt.Errorf("the expression has %d bytes, more than the limit of %d", n, MaxExpressionBytes)
	}
	toks, err := lex(src, from)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.peek().kind == tokEOF {
		return nil, errAt(from, "empty expression")
	}
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, unexpected(t)
	}
	return e, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(text string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == text
}

func (p *parser) expect(text string) error {
	if !p.isOp(text) {
		t := p.peek()
		if t.kind == tokEOF {
			return errAt(t.pos, "expected %q, found the end of the expression", text)
		}
		return errAt(t.pos, "expected %q, found %q", text, t.text)
	}
	p.next()
	return nil
}

// parseExpr is the entry of every nested expression, so it bounds nesting.
func (p *parser) parseExpr() (expr, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > MaxDepth {
		return nil, errAt(p.peek().pos, "expression nested deeper than %d levels, the limit", MaxDepth)
	}
	l, err := p.parseCond()
	if err != nil {
		return nil, err
	}
	for p.isOp("||") {
		t := p.next()
		r, err := p.parseCond()
		if err != nil {
			return nil, err
		}
		l = &binaryExpr{pos: t.pos, op: "||", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseCond() (expr, error) {
	c, err := p.parseConcat()
	if err != nil || !p.isOp("?") {
		return c, err
	}
	t := p.next()
	then, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if err := p.expect(":"); err != nil {
		return nil, err
	}
	els, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	return &condExpr{pos: t.pos, cond: c, then: then, else_: els}, nil
}

// startsOperand says whether t begins an operand, which after another
// operand means juxtaposition (concatenation).
func startsOperand(t token) bool {
	switch t.kind {
	case tokIdent, tokInt, tokFloat, tokString:
		return true
	case tokOp:
		return strings.Contains("([{!~", t.text) && len(t.text) == 1
	}
	return false
}

func (p *parser) parseConcat() (expr, error) {
	first, err := p.parseLogic()
	if err != nil {
		return nil, err
	}
	parts := []expr{first}
	for startsOperand(p.peek()) {
		e, err := p.parseLogic()
		if err != nil {
			return nil, err
		}
		parts = append(parts, e)
	}
	if len(parts) == 1 {
		return first, nil
	}
	return &concatExpr{pos: first.position(), parts: parts}, nil
}

// binaryLevel parses operands joined by any of ops, left-associative.
func (p *parser) binaryLevel(ops []string, operand func() (expr, error)) (expr, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tokOp || !contains(ops, t.text) {
			return l, nil
		}
		p.next()
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = &binaryExpr{pos: t.pos, op: t.text, l: l, r: r}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unexpected is the error for a token no rule accepts here.
func unexpected(t token) error {
	switch {
	case t.kind == tokEOF:
		return errAt(t.pos, "unexpected end of the expression")
	case t.text == "&&":
		return errAt(t.pos, "`&&` is not Spiff: write `-and`")
	case t.text == "+" || t.text == "-" || t.text == "*" || t.text == "/" || t.text == "%":
		return errAt(t.pos, "operator %q needs an operand on each side", t.text)
	}
	return errAt(t.pos, "unexpected %q", t.text)
}

func (p *parser) parseLogic() (expr, error) {
	return p.binaryLevel([]string{"-or", "-and"}, p.parseCompare)
}

func (p *parser) parseCompare() (expr, error) {
	return p.binaryLevel([]string{"==", "!=", "<=", ">=", "<", ">"}, p.parseSum)
}

func (p *parser) parseSum() (expr, error) {
	return p.binaryLevel([]string{"+", "-"}, p.parseProduct)
}

func (p *parser) parseProduct() (expr, error) {
	return p.binaryLevel([]string{"*", "/", "%"}, p.parseUnary)
}

func (p *parser) parseUnary() (expr, error) {
	if p.isOp("!") {
		t := p.next()
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: t.pos, op: "!", x: x}, nil
	}
	return p.parseOperand()
}
