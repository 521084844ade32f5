package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// inProcess is the conductor's relay run by bench/peer conductor (which
// calls conductor.Run) instead of the acp-conductor binary, so that it can
// write pprof profiles.
func inProcess(n int) chain {
	return chain{name: fmt.Sprintf("in-process conductor.Run, %d proxies", n), kind: "harness", proxies: n}
}

// profile runs three scenarios through the in-process conductor with pprof
// on, and leaves the profiles and their top entries in dir:
//
//	latency     3 proxies, prompts with no updates one by one: CPU profiles of
//	            the conductor and of each proxy, and the conductor's
//	            execution trace, from which the scheduler-latency profile
//	            (time runnable goroutines waited for a thread) is derived
//	throughput  0 proxies, prompts with 100 updates: the same
//	big         3 proxies, one large prompt: CPU and allocation profiles
func (b *bench) profile(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := b.plan
	runs := []struct {
		name    string
		proxies int
		args    []string
	}{
		{"latency", 3, []string{"-scenario", "stream", "-warmup", strconv.Itoa(p.warmup), "-latency", strconv.Itoa(p.latency), "-tp3", "0", "-tp100", "0"}},
		{"throughput", 0, []string{"-scenario", "stream", "-warmup", strconv.Itoa(p.warmup), "-latency", "0", "-tp3", "0", "-tp100", strconv.Itoa(10 * p.tp100)}},
		{"big", 3, []string{"-scenario", "big", "-bytes", strconv.Itoa(p.bigBytes)}},
	}
	for _, r := range runs {
		progress("profiling the %s scenario through %s", r.name, inProcess(r.proxies).name)
		prefix := filepath.Join(dir, r.name+"-")
		env := []string{
			"BENCH_CPUPROFILE=" + prefix + "conductor.cpu.pprof",
			"BENCH_MEMPROFILE=" + prefix + "conductor.allocs.pprof",
			"BENCH_PROXY_CPUPROFILE=" + prefix + "proxy.cpu.pprof",
		}
		if r.name != "big" {
			env = append(env, "BENCH_TRACE="+prefix+"conductor.trace")
		}
		var res any
		if err := b.client(inProcess(r.proxies), &res, env, r.args...); err != nil {
			return err
		}
		progress("%s result: %v", r.name, res)
		if r.name != "big" {
			out, err := exec.Command("go", "tool", "trace", "-pprof=sched", prefix+"conductor.trace").Output()
			if err != nil {
				return fmt.Errorf("go tool trace -pprof=sched: %w", err)
			}
			if err := os.WriteFile(prefix+"conductor.sched.pprof", out, 0o644); err != nil {
				return err
			}
		}
	}
	// Top entries, next to the profiles.
	files, _ := filepath.Glob(filepath.Join(dir, "*.pprof*"))
	for _, f := range files {
		args := []string{"tool", "pprof", "-top", "-nodecount=40"}
		if strings.Contains(f, ".allocs.") {
			args = append(args, "-sample_index=alloc_space")
		}
		out, err := exec.Command("go", append(args, b.peer, f)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %w\n%s", f, err, out)
		}
		top := strings.TrimSuffix(f, ".pprof") + ".top.txt"
		if i := strings.LastIndex(f, ".pprof."); i >= 0 { // a proxy's, suffixed with its pid
			top = f[:i] + "." + f[i+len(".pprof."):] + ".top.txt"
		}
		if err := os.WriteFile(top, out, 0o644); err != nil {
			return err
		}
	}
	progress("profiles and their top entries are in %s; the binary for go tool pprof is kept there as peer", dir)
	data, err := os.ReadFile(b.peer)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "peer"), data, 0o755)
}
