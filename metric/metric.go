package metric

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Kind says how a sample's value moves.
type Kind uint8

const (
	// Counter is a value that only grows while the process lives.
	Counter Kind = iota
	// Gauge is a value that goes up and down (machines listed, transfers waiting).
	Gauge
)

func (k Kind) String() string {
	if k == Gauge {
		return "gauge"
	}
	return "counter"
}

// Label is one label of a sample: its name and value.
type Label struct{ Name, Value string }

// Sample is one value of a family of counters.
type Sample struct {
	Name   string  // the family's name ("proxydhcp_answered_total"), the package doc's convention
	Help   string  // one sentence saying what the family counts; the same for every sample of it
	Kind   Kind    // Counter or Gauge
	Labels []Label // the sample's labels; every sample of a family has the same names in the same order
	Value  uint64
}

// Label returns the value of the label named name, "" when the sample has none.
func (s Sample) Label(name string) string {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// LabelNames returns the names of the sample's labels, in order.
func (s Sample) LabelNames() []string {
	out := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = l.Name
	}
	return out
}

// LabelValues returns the values of the sample's labels, in order.
func (s Sample) LabelValues() []string {
	out := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = l.Value
	}
	return out
}

// Family is a family of samples: what every sample of it shares. A package declares its
// families once and makes each sample with [Family.Sample].
type Family struct {
	Name   string
	Help   string
	Kind   Kind
	Labels []string // the names of the labels, in order
}

// Sample returns the family's sample of value v with the label values given, one per
// label name in order. It panics when the count differs: that is a mistake in the
// calling package, which its tests (with [Check]) catch.
func (f Family) Sample(v uint64, values ...string) Sample {
	if len(values) != len(f.Labels) {
		panic(fmt.Sprintf("metric: %s has %d labels, got %d values", f.Name, len(f.Labels), len(values)))
	}
	s := Sample{Name: f.Name, Help: f.Help, Kind: f.Kind, Value: v}
	if len(values) > 0 {
		s.Labels = make([]Label, len(values))
		for i, name := range f.Labels {
			s.Labels[i] = Label{Name: name, Value: values[i]}
		}
	}
	return s
}

// With returns copies of samples with label l put first: a host that runs several of one
// component (two listeners) says which one each sample is of.
func With(l Label, samples []Sample) []Sample {
	out := make([]Sample, len(samples))
	for i, s := range samples {
		s.Labels = append([]Label{l}, s.Labels...)
		out[i] = s
	}
	return out
}

// CheckError is the problem [Check] found with one family.
type CheckError struct {
	Name    string // the family's name
	Problem string
}

func (e *CheckError) Error() string { return "metric: " + e.Name + ": " + e.Problem }

var _ error = &CheckError{}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*[a-z0-9]$`)

// Check reports every way samples break the package doc's convention, each as a
// *CheckError: a malformed family or label name, a counter whose name does not end in
// _total or a gauge whose name does, no help, samples of one family that disagree on
// their kind, help or label names, and two samples with the same labels. Nil when there
// are none.
func Check(samples []Sample) error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, &CheckError{Name: name, Problem: fmt.Sprintf(format, args...)})
	}
	first := map[string]Sample{}
	seen := map[string]bool{}
	for _, s := range samples {
		f, ok := first[s.Name]
		if !ok {
			first[s.Name] = s
			if !nameRE.MatchString(s.Name) {
				bad(s.Name, "want lower-case snake case")
			}
			if s.Help == "" {
				bad(s.Name, "no help")
			}
			if total := strings.HasSuffix(s.Name, "_total"); total != (s.Kind == Counter) {
				bad(s.Name, "a %s whose name ends in _total: %v; want only counters to", s.Kind, total)
			}
			for _, l := range s.Labels {
				if !nameRE.MatchString(l.Name) {
					bad(s.Name, "label %q: want lower-case snake case", l.Name)
				}
			}
		} else if f.Kind != s.Kind || f.Help != s.Help || !slices.Equal(f.LabelNames(), s.LabelNames()) {
			bad(s.Name, "samples disagree on kind, help or label names: %v and %v", f.LabelNames(), s.LabelNames())
		}
		key := s.Name + "\x00" + strings.Join(s.LabelValues(), "\x00")
		if seen[key] {
			bad(s.Name, "two samples with labels %v", s.LabelValues())
		}
		seen[key] = true
	}
	return errors.Join(errs...)
}
