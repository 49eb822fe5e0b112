package tmpl

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"text/template"
	"text/template/parse"
	"time"
)

// Limits on how long one render runs. text/template has no such limit and a
// render cannot be cancelled: `{{ range $u }}{{ range $u }}{{ end }}{{ end }}`
// over `until 10000` ran 10^8 iterations in 6 s, three such ranges would run
// for about 17 hours, and a template calling itself twice grows the same way,
// all the while holding one of the controller's workers.
const (
	// MaxSteps is how many loop iterations and template calls one render
	// may run (a render of real blueprints runs a few hundred).
	MaxSteps = 5_000_000
	// Timeout is how long one render may run, like the CEL data mappings'
	// (internal/mapping): a backstop for steps that are slow (a function
	// hashing a long string takes milliseconds). A reconcile's deadline
	// (ExecuteContext) can end it earlier.
	Timeout = 5 * time.Second
	// MaxNesting is how deeply a render may nest template calls and if,
	// with and range blocks, all counted alike (see instrument). Each is a
	// few frames of text/template's recursion on the render's stack, and
	// text/template limits only the calls, at 100 000: a template calling
	// itself took a 64 MiB stack to get there, and one calling itself
	// inside ten nested withs overflowed the 1 GiB stack Go allows, a
	// fatal error that no recover catches, which would crash-loop the
	// controller. And an error (the deadline's too) unwinds nested ranges
	// in time growing with the square of their depth, beyond any
	// deadline: 8 000 took 10 s, 2 000 half a second. Real templates
	// nest a few dozen levels; values nest at most 1000 (maxDepth).
	MaxNesting = 1000
)

// maxSteps and timeout are MaxSteps and Timeout; tests lower them.
var (
	maxSteps = int64(MaxSteps)
	timeout  = Timeout
)

// The hidden functions: the renderer inserts calls to them into the parsed
// template (instrument). Their names are added to the template only after
// it is parsed, so a template that names them fails to parse ("function not
// defined") and cannot call them; a template cannot define functions, so it
// cannot shadow them either, and the variable the step counter is assigned
// to ($-step) is not a name the template lexer accepts.
const (
	stepFunc   = "terraceStep"
	tickFunc   = "terraceTick"
	rangeFunc  = "terraceRange"
	outputFunc = "terraceOutput"
	enterFunc  = "terraceEnter"
	leaveFunc  = "terraceLeave"
	stepVar    = "$-step"
)

func errSteps() error {
	return fmt.Errorf("the template ran more than %d steps (loop iterations and template calls), the limit of one render", maxSteps)
}

func errTimeout() error {
	return fmt.Errorf("the template ran longer than %s, the limit of one render", timeout)
}

// errNesting says what nests besides the obvious: an {{ else if }} (or
// {{ else with }}) is an if inside the else of the block before it, so a
// long chain of them, which reads as flat, nests one level per link, and a
// chain of more than MaxNesting links is refused as deep nesting is.
func errNesting() error {
	return fmt.Errorf("the template nests template calls and if, with and range blocks more than %d levels deep, the limit of one render "+
		"(each {{ else if }} or {{ else with }} of a chain counts as a block inside the one before it: "+
		"a chain of more than %d of them is refused too; look the value up in a dict instead)", MaxNesting, MaxNesting)
}

// enter counts, before a template call, the levels it nests (see
// instrument), failing if they and the inner levels of the template it
// calls would nest deeper than MaxNesting; leave, after the call returned,
// takes them off again. A call that fails ends the render, so no leave that
// matters is missed.
func (b *budget) enter(levels, inner int) (bool, error) {
	b.depth += int64(levels)
	if b.depth+int64(inner) > MaxNesting {
		return true, errNesting()
	}
	return true, nil
}

func (b *budget) leave(levels int) bool {
	b.depth -= int64(levels)
	return true
}

// step counts one step of the render and fails it past maxSteps or the
// deadline.
func (b *budget) step() error {
	return b.steps1(1)
}

func (b *budget) steps1(n int64) error {
	b.steps -= n
	if b.steps < 0 {
		return errSteps()
	}
	return b.checkTime()
}

// ranging is called with the value a range is about to iterate over and
// counts all its iterations at once, before the first, so that the step
// limit stops a loop before it starts (each iteration only checks the
// deadline, terraceTick). A range that breaks early is counted whole. The value is passed through unchanged.
func (b *budget) ranging(v any) (any, error) {
	n := int64(1)
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String, reflect.Chan:
		n = int64(rv.Len())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n = int64(min(rv.Uint(), 1<<62))
	}
	// The range itself is a step, even when it has nothing to iterate.
	if err := b.steps1(max(n, 1)); err != nil {
		return nil, err
	}
	return v, nil
}

// checkTime fails the render past its deadline, or once the reconcile's
// context is done.
func (b *budget) checkTime() error {
	select {
	case <-b.done:
		return b.deadlineError()
	default:
	}
	if time.Now().After(b.deadline) {
		if b.byCtx {
			return b.deadlineError()
		}
		return errTimeout()
	}
	return nil
}

// output is called with the value of every action that prints, before
// text/template prints it: fmt builds the whole text first and only then
// hands it to the limitedWriter, so a value that shared references make huge
// (see measure.go) would be built in memory whole, and one that contains
// itself would overflow the stack. The value is passed through unchanged, so
// it prints exactly as before.
func (b *budget) output(v any) (any, error) {
	// Each action checks the deadline too: the iterations of a range are
	// counted up front, and what a loop body does (print, call functions,
	// call templates, run ranges) checks the time.
	if err := b.checkTime(); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	left := int64(b.out.left)
	if _, err := measure(reflect.ValueOf(v), left, unlimited); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, errOutputTooLarge
		}
		return nil, err
	}
	return v, nil
}

// hidden returns the functions instrument's calls name, bound to b.
func hidden(b *budget) template.FuncMap {
	return template.FuncMap{
		stepFunc:   func() (bool, error) { return true, b.step() },
		tickFunc:   func() (bool, error) { return true, b.checkTime() },
		rangeFunc:  b.ranging,
		outputFunc: b.output,
		enterFunc:  b.enter,
		leaveFunc:  b.leave,
	}
}

// instrument rewrites every tree of t (the main template and every template
// it defines) so that
//   - each template's body starts with a step ({{ $-step := terraceStep }})
//     and each range's value passes through terraceRange ({{ range pipeline
//     | terraceRange }}), which counts its iterations: every loop iteration
//     and every template call, the only ways a template repeats work, is
//     counted; a range over an integer is a range like any other, and
//     text/template has no other loop;
//   - each range's body starts with a deadline check ({{ $-step :=
//     terraceTick }}), so no loop runs on past the deadline, whatever its
//     body does;
//   - each action that prints ({{ pipeline }}, not {{ $x := pipeline }})
//     passes its value through terraceOutput ({{ pipeline | terraceOutput }}),
//     the only way text/template writes a value (text nodes are the
//     template's own text; {{ template }} prints through the actions of the
//     template it calls, which are rewritten too);
//   - each template call ({{ template "name" pipeline }}) is put between
//     {{ $-step := terraceEnter n m }} and {{ $-step := terraceLeave n }},
//     n being the levels the call nests (itself and the if, with and range
//     blocks it is in, else branches included: an {{ else if }} is an if
//     inside the else), m the most blocks the template it calls nests. The
//     calls under way and the blocks of the last one may nest MaxNesting
//     levels in all, and so a render never nests deeper, without a count
//     per block at run time.
//
// A template whose blocks alone nest deeper than MaxNesting is refused
// (instrument returns the error). It runs after Parse and before Execute, on
// the trees Execute runs; nothing a template does at run time can add a tree
// (text/template cannot parse from within a template), so the calls cannot
// be bypassed.
func instrument(t *template.Template) error {
	// How deeply each tree's blocks nest, and so each template's, by its
	// name (the calls name them).
	trees := map[*parse.Tree]int{}
	nests := map[string]int{}
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		n, ok := trees[tt.Tree]
		if !ok {
			var deep parse.Node
			if n, deep = nesting(tt.Root, 0); deep != nil {
				location, _ := tt.ErrorContext(deep)
				return fmt.Errorf("template: %s: %w", location, errNesting())
			}
			trees[tt.Tree] = n
		}
		nests[tt.Name()] = n
	}
	for tree := range trees {
		instrumentList(tree, tree.Root, 0, nests)
		tree.Root.Nodes = append([]parse.Node{stepNode(tree, tree.Root.Pos)}, tree.Root.Nodes...)
	}
	return nil
}

// nesting is how deeply the if, with and range blocks in l nest, l being
// nested in blocks of them already, or the first block nested deeper than
// MaxNesting (where it stops looking).
func nesting(l *parse.ListNode, blocks int) (int, parse.Node) {
	if l == nil {
		return blocks, nil
	}
	most := blocks
	for _, n := range l.Nodes {
		var branches *parse.BranchNode
		switch n := n.(type) {
		case *parse.IfNode:
			branches = &n.BranchNode
		case *parse.WithNode:
			branches = &n.BranchNode
		case *parse.RangeNode:
			branches = &n.BranchNode
		default:
			continue
		}
		if blocks+1 > MaxNesting {
			return 0, n
		}
		for _, branch := range []*parse.ListNode{branches.List, branches.ElseList} {
			d, deep := nesting(branch, blocks+1)
			if deep != nil {
				return 0, deep
			}
			most = max(most, d)
		}
	}
	return most, nil
}

// instrumentList rewrites l, a list nested in blocks if, with and range
// blocks of tree; nests are how deeply the templates' blocks nest.
func instrumentList(tree *parse.Tree, l *parse.ListNode, blocks int, nests map[string]int) {
	if l == nil {
		return
	}
	calls := 0
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 {
				n.Pipe.Cmds = append(n.Pipe.Cmds, command(tree, n.Pos, outputFunc))
			}
		case *parse.TemplateNode:
			calls++
		case *parse.IfNode:
			instrumentList(tree, n.List, blocks+1, nests)
			instrumentList(tree, n.ElseList, blocks+1, nests)
		case *parse.WithNode:
			instrumentList(tree, n.List, blocks+1, nests)
			instrumentList(tree, n.ElseList, blocks+1, nests)
		case *parse.RangeNode:
			instrumentList(tree, n.List, blocks+1, nests)
			instrumentList(tree, n.ElseList, blocks+1, nests)
			n.Pipe.Cmds = append(n.Pipe.Cmds, command(tree, n.Pos, rangeFunc))
			// Every iteration checks the deadline first: a body that calls
			// no function of the FuncMap and prints nothing (text/template's
			// own lt, len, index and the like, assignments, ifs) checked it
			// nowhere, and fifty lt of two 1 MB strings take milliseconds.
			// About half a microsecond an iteration; the steps stay counted
			// up front (terraceRange).
			if n.List != nil {
				n.List.Nodes = append([]parse.Node{declNode(tree, n.List.Pos, tickFunc)}, n.List.Nodes...)
			}
		}
	}
	if calls == 0 {
		return
	}
	nodes := make([]parse.Node, 0, len(l.Nodes)+2*calls)
	for _, n := range l.Nodes {
		if call, ok := n.(*parse.TemplateNode); ok {
			// A template not defined fails the call anyway.
			nodes = append(nodes, countNode(tree, call.Pos, enterFunc, blocks+1, nests[call.Name]), call, countNode(tree, call.Pos, leaveFunc, blocks+1))
			continue
		}
		nodes = append(nodes, n)
	}
	l.Nodes = nodes
}

// command is a pipeline command calling fn, located at pos so that an error
// names the line of the action or range it was inserted into.
func command(tree *parse.Tree, pos parse.Pos, fn string) *parse.CommandNode {
	id := parse.NewIdentifier(fn).SetTree(tree).SetPos(pos)
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{id}}
}

// stepNode is {{ $-step := terraceStep }}.
func stepNode(tree *parse.Tree, pos parse.Pos) *parse.ActionNode {
	return declNode(tree, pos, stepFunc)
}

// declNode is {{ $-step := fn }}: an action with a declaration, so that it
// prints nothing.
func declNode(tree *parse.Tree, pos parse.Pos, fn string) *parse.ActionNode {
	v := &parse.VariableNode{NodeType: parse.NodeVariable, Pos: pos, Ident: []string{stepVar}}
	pipe := &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Decl: []*parse.VariableNode{v}, Cmds: []*parse.CommandNode{command(tree, pos, fn)}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Pipe: pipe}
}

// countNode is {{ $-step := fn n... }}.
func countNode(tree *parse.Tree, pos parse.Pos, fn string, n ...int) *parse.ActionNode {
	a := declNode(tree, pos, fn)
	cmd := a.Pipe.Cmds[0]
	for _, i := range n {
		cmd.Args = append(cmd.Args, &parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: int64(i), Text: strconv.Itoa(i)})
	}
	return a
}
