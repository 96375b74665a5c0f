// Package loadgen is a small HTTP load generator for comparing a server
// against a baseline in the same run.
//
// Because benchmark machines are often shared and noisy, absolute figures
// are of limited value; the intended use is to measure a bare net/http
// handler (see BareHandler) and the server under test back to back with
// identical Options, and to report the server's throughput and latency as
// ratios against that baseline (see Report).
//
// Run drives a Target with a fixed number of concurrent keep-alive
// connections, either as fast as possible (closed loop) or at a fixed
// arrival rate (open loop). Latencies are recorded in per-worker
// log-linear histograms with better than 1% relative precision, so the hot
// path takes no locks and allocates no sample slices. In open-loop mode a
// request delayed because all connections were busy is timed from its
// intended send time, which avoids coordinated omission when the server
// falls behind.
package loadgen
