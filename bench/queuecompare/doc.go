// Package queuecompare benchmarks the delivery queue kept in the messages
// table itself (sqlstore/queue.go) against River (github.com/riverqueue/river)
// under the same workload, on PostgreSQL and on SQLite.
//
// Everything lives in the package's _test.go files, so River is a dependency
// of this benchmark only and nothing here is compiled into Switchboard. Run it
// with
//
//	SWITCHBOARD_TEST_POSTGRES='postgres://127.0.0.1:5432/test?sslmode=disable' \
//	    go test ./bench/queuecompare -run '^$' -bench . -benchtime 1x
//
// and see docs/queue-choice.md for the method, the flags and the results.
package queuecompare
