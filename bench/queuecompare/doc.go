// Package queuecompare benchmarks the delivery queue kept in the messages
// table itself (sqlstore/queue.go) against River (github.com/riverqueue/river)
// under the same workload, on PostgreSQL and on SQLite: 64 producers insert a
// message and enqueue its delivery in one durable transaction, and workers
// take each message, hand it to a no-op provider and mark it delivered.
// docs/architecture.md says what it found and why the queue stayed a table.
//
// Everything lives in the package's _test.go files, so River is a dependency
// of this benchmark only and nothing here is compiled into Switchboard. Run it
// with
//
//	SWITCHBOARD_TEST_POSTGRES='postgres://127.0.0.1:5432/test?sslmode=disable' \
//	    go test ./bench/queuecompare -run '^$' -bench . -benchtime 1x -timeout 30m
//
// It runs PostgreSQL and SQLite, 5 alternating rounds of 4 s per queue, in
// about 2 minutes; without SWITCHBOARD_TEST_POSTGRES the PostgreSQL part is
// skipped, saying so. Without -bench only the unit tests run, and with
// SWITCHBOARD_TEST_TIMING=1 a SQLite smoke run of both queues. The output has
// one line per queue per round, a table per database and River's ratios to
// the in-table queue, also reported as benchmark metrics (accepted-ratio,
// delivered-ratio, e2e-p99-ratio, ...) that benchstat reads. Flags go after
// the package:
//
//	-qc.dialects        databases to run on (postgres,sqlite)
//	-qc.queues          queues to compare, the first the ratios' baseline
//	                    (in-table,river; river-default is River with its
//	                    default fetch settings)
//	-qc.rounds          alternating rounds (5)
//	-qc.duration        measured window per queue per round (4s)
//	-qc.warmup          load before each window, not recorded (1s)
//	-qc.drain           longest wait for the queue to drain (20s)
//	-qc.producers       concurrent producers (64)
//	-qc.rate            offered load in messages a second over all producers
//	                    (open loop, latency from each message's scheduled
//	                    time); 0, the default, is a closed loop
//	-qc.insert-only     producers only, no workers: the enqueue alone
//	-qc.batch           in-table claim batch (512)
//	-qc.pool            PostgreSQL pool size, shared (32)
//	-qc.river-workers   River MaxWorkers (512)
//	-qc.river-cooldown  River FetchCooldown (10ms; River's default is 100ms)
//	-qc.river-poll      River FetchPollInterval (1s)
//	-qc.river-load      River's worker loads the message row before sending (true)
//	-qc.river-direct    River's worker commits its UPDATE on its own instead of
//	                    through the group-commit writer
package queuecompare
