package deploy_test

import (
	"fmt"
	"slices"
	"strings"
)

// selector is one metric a PromQL expression reads, with the label names its
// matchers name.
type selector struct {
	metric string
	labels []string
}

// promQL is what an expression refers to: its selectors, the label names of
// its by/without/on/ignoring lists, and whether it aggregates.
type promQL struct {
	selectors  []selector
	grouping   []string
	aggregates bool
}

// promFunctions are the functions and aggregations the files may use; a name
// followed by "(" outside this list is a typo, not a metric.
var promFunctions = map[string]bool{
	"abs": true, "absent": true, "avg_over_time": true, "ceil": true, "changes": true, "clamp_max": true,
	"clamp_min": true, "delta": true, "deriv": true, "floor": true, "histogram_quantile": true, "increase": true,
	"irate": true, "label_replace": true, "max_over_time": true, "min_over_time": true, "predict_linear": true,
	"rate": true, "resets": true, "round": true, "scalar": true, "sort": true, "sort_desc": true,
	"sum_over_time": true, "time": true, "vector": true,
}

// promAggregations drop labels not named in by.
var promAggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "group": true, "stddev": true,
	"stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true,
}

// promKeywords are the binary operators and modifiers spelled as words.
var promKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// parsePromQL reads the metric names and label names of a PromQL expression
// with a small tokenizer: enough to check the names these files use, not a
// validation of the whole grammar (promtool check rules does that).
func parsePromQL(expr string) (promQL, error) {
	var out promQL
	s := expr
	i := 0
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func() {
		for i < len(s) && strings.ContainsRune(" \t\r\n", rune(s[i])) {
			i++
		}
	}
	ident := func() string {
		start := i
		for i < len(s) && isIdent(s[i]) {
			i++
		}
		return s[start:i]
	}
	str := func() error {
		q := s[i]
		i++
		for i < len(s) && s[i] != q {
			if s[i] == '\\' && q != '`' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return fmt.Errorf("unterminated string in %q", expr)
		}
		i++
		return nil
	}
	// labelList reads "(a, b)" after by/without/on/ignoring/group_left.
	labelList := func() ([]string, error) {
		skipSpace()
		if i >= len(s) || s[i] != '(' {
			return nil, nil // group_left without labels
		}
		i++
		var names []string
		for {
			skipSpace()
			if i < len(s) && s[i] == ')' {
				i++
				return names, nil
			}
			if i >= len(s) || !isIdentStart(s[i]) {
				return nil, fmt.Errorf("bad label list at %d in %q", i, expr)
			}
			names = append(names, ident())
			skipSpace()
			if i < len(s) && s[i] == ',' {
				i++
			}
		}
	}
	// matchers reads `{name op "value", …}` and returns the names.
	matchers := func() ([]string, error) {
		i++ // {
		var names []string
		for {
			skipSpace()
			if i < len(s) && s[i] == '}' {
				i++
				return names, nil
			}
			if i >= len(s) || !isIdentStart(s[i]) {
				return nil, fmt.Errorf("bad label matcher at %d in %q", i, expr)
			}
			names = append(names, ident())
			skipSpace()
			op := ""
			for i < len(s) && strings.ContainsRune("=!~", rune(s[i])) {
				op += string(s[i])
				i++
			}
			if !slices.Contains([]string{"=", "!=", "=~", "!~"}, op) {
				return nil, fmt.Errorf("bad matcher operator %q in %q", op, expr)
			}
			skipSpace()
			if i >= len(s) || !strings.ContainsRune("\"'`", rune(s[i])) {
				return nil, fmt.Errorf("matcher value is not a string in %q", expr)
			}
			if err := str(); err != nil {
				return nil, err
			}
			skipSpace()
			if i < len(s) && s[i] == ',' {
				i++
			}
		}
	}
	depth := 0
	for i < len(s) {
		c := s[i]
		switch {
		case strings.ContainsRune(" \t\r\n", rune(c)):
			i++
		case c == '"' || c == '\'' || c == '`':
			if err := str(); err != nil {
				return out, err
			}
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return out, fmt.Errorf("unterminated range in %q", expr)
			}
			i += end + 1
		case c == '{':
			return out, fmt.Errorf("a selector without a metric name in %q", expr)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.' || (s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E')) {
				i++
			}
		case isIdentStart(c):
			name := ident()
			save := i
			skipSpace()
			next := byte(0)
			if i < len(s) {
				next = s[i]
			}
			switch {
			case promKeywords[name]:
				if slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, name) {
					labels, err := labelList()
					if err != nil {
						return out, err
					}
					out.grouping = append(out.grouping, labels...)
				}
			case promAggregations[name] && (next == '(' || strings.HasPrefix(s[i:], "by") || strings.HasPrefix(s[i:], "without")):
				out.aggregates = true
			case next == '(':
				if !promFunctions[name] {
					return out, fmt.Errorf("unknown function %q in %q", name, expr)
				}
			default:
				i = save
				sel := selector{metric: name}
				skipSpace()
				if i < len(s) && s[i] == '{' {
					labels, err := matchers()
					if err != nil {
						return out, err
					}
					sel.labels = labels
				} else {
					i = save
				}
				out.selectors = append(out.selectors, sel)
			}
		case c == '(':
			depth++
			i++
		case c == ')':
			depth--
			if depth < 0 {
				return out, fmt.Errorf("unbalanced parentheses in %q", expr)
			}
			i++
		default:
			i++
		}
	}
	if depth != 0 {
		return out, fmt.Errorf("unbalanced parentheses in %q", expr)
	}
	if len(out.selectors) == 0 {
		return out, fmt.Errorf("no metric in %q", expr)
	}
	return out, nil
}
