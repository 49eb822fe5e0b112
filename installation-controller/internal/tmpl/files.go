package tmpl

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
)

// The blueprint filesystem functions of Landscaper's GoTemplate executor:
// include, readFile and readDir read the files of the blueprint the
// execution belongs to (Source.Files), which is the templates' whole
// filesystem.
//
// An included file is a template of the same render: it is parsed with the
// execution's template, before the render starts, so that the step,
// nesting and output bounds of steps.go apply to it as to the execution's
// own text. That is why include takes a literal path (the parser must know
// which files to take in) and why includes nest at most MaxIncludeDepth
// deep (a file including itself would otherwise recurse in Go frames,
// outside the nesting count of template calls).
const (
	includeFunc  = "include"
	readFileFunc = "readFile"
	readDirFunc  = "readDir"
	// MaxIncludeDepth is how deeply includes may nest in one render.
	MaxIncludeDepth = 16
	// fileTemplatePrefix names the templates of included files; a
	// template cannot define a name with a NUL in it.
	fileTemplatePrefix = "\x00file:"
)

// fileFuncs are the filesystem functions of a render of src; set is the
// render's template, known once it is parsed.
func fileFuncs(files map[string]string, set **template.Template) template.FuncMap {
	depth := 0
	return template.FuncMap{
		includeFunc: func(name string, data any) (string, error) {
			p, err := cleanPath(name)
			if err != nil {
				return "", fmt.Errorf("include %q: %w", name, err)
			}
			t := (*set).Lookup(fileTemplatePrefix + p)
			if t == nil {
				if _, ok := files[p]; ok {
					return "", fmt.Errorf("include %q: write the path as a literal string: the files a template includes are parsed before the render", name)
				}
				return "", fmt.Errorf("include %q: no such file in the blueprint", name)
			}
			if depth >= MaxIncludeDepth {
				return "", fmt.Errorf("include %q: includes nest more than %d deep, the limit of one render", name, MaxIncludeDepth)
			}
			depth++
			defer func() { depth-- }()
			var buf bytes.Buffer
			w := &limitedWriter{w: &buf, left: MaxOutputBytes}
			if err := t.Execute(w, data); err != nil {
				return "", fmt.Errorf("include %q: %w", name, err)
			}
			return buf.String(), nil
		},
		readFileFunc: func(name string) (string, error) {
			p, err := cleanPath(name)
			if err != nil {
				return "", fmt.Errorf("readFile %q: %w", name, err)
			}
			content, ok := files[p]
			if !ok {
				return "", fmt.Errorf("readFile %q: no such file in the blueprint", name)
			}
			return content, nil
		},
		readDirFunc: func(name string) ([]map[string]any, error) {
			if name == "" || name == "." || name == "/" {
				return readDir(files, "")
			}
			dir, err := cleanPath(name)
			if err != nil {
				return nil, fmt.Errorf("readDir %q: %w", name, err)
			}
			return readDir(files, dir)
		},
	}
}

// readDir lists the files and directories directly in dir ("" is the
// root), by name, each as {Name, IsDir, Size}: what templates read of
// Landscaper's FileInfo values.
func readDir(files map[string]string, dir string) ([]map[string]any, error) {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	seen := map[string]map[string]any{}
	for p, content := range files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || rest == "" {
			continue
		}
		name, _, isDir := strings.Cut(rest, "/")
		if _, done := seen[name]; done {
			continue
		}
		entry := map[string]any{"Name": name, "IsDir": isDir, "Size": 0}
		if !isDir {
			entry["Size"] = len(content)
		}
		seen[name] = entry
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("readDir %q: no such directory in the blueprint", dir)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, seen[n])
	}
	return out, nil
}

// cleanPath is a blueprint path without a leading "/" or "./"; one that
// leaves the blueprint ("..") is refused.
func cleanPath(name string) (string, error) {
	p := strings.TrimPrefix(path.Clean(strings.TrimPrefix(name, "/")), "./")
	switch {
	case p == "." || p == "":
		return "", fmt.Errorf("not a file")
	case p == ".." || strings.HasPrefix(p, "../"):
		return "", fmt.Errorf("a path leaving the blueprint")
	}
	return p, nil
}

// parseIncludes parses every file that t (and, in turn, the files it
// includes) names in a literal include into t's set. A file the blueprint
// does not have is left for include to report when the render reaches it.
func parseIncludes(t *template.Template, files map[string]string) error {
	queue := includedPaths(t.Tree)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		name := fileTemplatePrefix + p
		content, ok := files[p]
		if !ok || t.Lookup(name) != nil {
			continue
		}
		ft, err := t.New(name).Parse(content)
		if err != nil {
			return fmt.Errorf("include %q: %w", p, err)
		}
		queue = append(queue, includedPaths(ft.Tree)...)
	}
	return nil
}

// includedPaths are the literal paths of the include calls in tree.
func includedPaths(tree *parse.Tree) []string {
	if tree == nil {
		return nil
	}
	var out []string
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n == nil {
				return
			}
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			if len(n.Args) >= 2 {
				if id, ok := n.Args[0].(*parse.IdentifierNode); ok && id.Ident == includeFunc {
					if s, ok := n.Args[1].(*parse.StringNode); ok {
						if p, err := cleanPath(s.Text); err == nil {
							out = append(out, p)
						}
					}
				}
			}
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.TemplateNode:
			walk(n.Pipe)
		}
	}
	walk(tree.Root)
	return out
}
