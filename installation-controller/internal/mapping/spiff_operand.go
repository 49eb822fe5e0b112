package mapping

// parseOperand reads a literal, a reference, a parenthesised expression or
// a list or map literal.
func (p *parser) parseOperand() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokString:
		return &literalExpr{pos: t.pos, val: t.str}, nil
	case tokInt:
		return &literalExpr{pos: t.pos, val: t.num}, nil
	case tokFloat:
		return &literalExpr{pos: t.pos, val: t.flt}, nil
	case tokIdent:
		return p.parseIdent(t)
	case tokOp:
		switch t.text {
		case "(":
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			return e, p.expect(")")
		case "[":
			return p.parseList(t)
		case "{":
			return p.parseMap(t)
		case "~":
			return &literalExpr{pos: t.pos, val: nil}, nil
		}
	}
	return nil, unexpected(t)
}

func (p *parser) parseIdent(t token) (expr, error) {
	switch t.text {
	case "true", "false":
		return &literalExpr{pos: t.pos, val: t.text == "true"}, nil
	case "nil":
		return &literalExpr{pos: t.pos, val: nil}, nil
	}
	if what, ok := keywords[t.text]; ok {
		return nil, errAt(t.pos, "%q (%s) is Spiff that Terrace's data mappings do not support", t.text, what)
	}
	if n := p.peek(); n.kind == tokOp && n.text == "(" && !n.space {
		return nil, errAt(t.pos, "function calls (%s(…)) are not supported in data mappings", t.text)
	}
	ref := &refExpr{pos: t.pos, name: t.text}
	for {
		n := p.peek()
		switch {
		case n.kind == tokOp && n.text == "." && !n.space:
			p.next()
			if err := p.parseStep(ref, true); err != nil {
				return nil, err
			}
		case n.kind == tokOp && n.text == "[" && !n.space:
			if err := p.parseStep(ref, false); err != nil {
				return nil, err
			}
		default:
			return ref, nil
		}
	}
}

// parseStep reads one step of a path after `.` (a field, `[n]` or n) or
// a directly attached `[n]`.
func (p *parser) parseStep(ref *refExpr, afterDot bool) error {
	t := p.next()
	switch {
	case afterDot && t.kind == tokIdent && !t.space:
		ref.steps = append(ref.steps, t.text)
		return nil
	case afterDot && t.kind == tokInt && !t.space:
		ref.steps = append(ref.steps, int(t.num))
		return nil
	case t.kind == tokOp && t.text == "[" && (!t.space || !afterDot):
		idx := p.next()
		if idx.kind != tokInt || idx.num < 0 {
			return errAt(idx.pos, "only a non-negative integer may index a list here (projections and expressions in [] are not supported)")
		}
		ref.steps = append(ref.steps, int(idx.num))
		return p.expect("]")
	}
	return errAt(t.pos, "expected a field name or [index] after %q", ref.name)
}

func (p *parser) parseList(open token) (expr, error) {
	l := &listExpr{pos: open.pos}
	for !p.isOp("]") {
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		l.elems = append(l.elems, e)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return l, p.expect("]")
}

// parseMap reads `{ key = value, ... }`; a key is an expression that must
// evaluate to a string.
func (p *parser) parseMap(open token) (expr, error) {
	m := &mapExpr{pos: open.pos}
	for !p.isOp("}") {
		k, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expect("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		m.keys, m.vals = append(m.keys, k), append(m.vals, v)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return m, p.expect("}")
}
