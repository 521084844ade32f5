package tally

import (
	"fmt"
	"testing"
	"time"
)

// TestCounter steps a Counter through a flood on a clock the test moves:
// the first few are whole, the rest counted at most once per Every, and
// Unreported says what no line has told yet.
func TestCounter(t *testing.T) {
	now := time.Unix(0, 0)
	c := &Counter{Now: func() time.Time { return now }}
	var got []string
	step := func(advance time.Duration) {
		now = now.Add(advance)
		n, whole, count := c.Add(2)
		u, ok := c.Unreported()
		got = append(got, fmt.Sprintf("%d:%v/%v/%d,%v", n, whole, count, u, ok))
	}
	step(0)         // 1: whole
	step(0)         // 2: whole, the last
	step(0)         // 3: within Every of the last line: silent
	step(Every - 1) // 4: still within
	step(1)         // 5: Every since the last line: a count
	step(0)         // 6: silent again
	step(Every)     // 7: a count
	want := []string{
		"1:true/false/1,false",
		"2:true/false/2,false",
		"3:false/false/3,true",
		"4:false/false/4,true",
		"5:false/true/5,false",
		"6:false/false/6,true",
		"7:false/true/7,false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("steps:\n%v\nwant\n%v", got, want)
	}
}

// TestCounterZero: a Counter nobody added to has nothing to report.
func TestCounterZero(t *testing.T) {
	var c Counter
	if n, ok := c.Unreported(); n != 0 || ok {
		t.Errorf("Unreported() = %d, %v; want 0, false", n, ok)
	}
}
