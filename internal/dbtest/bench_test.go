package dbtest

import (
	"context"
	"testing"

	"github.com/switchboard/switchboard/sqlstore"
)

// BenchmarkFreshMigrated: what a test's migrated PostgreSQL database costs,
// made as before the templates (a schema, migrated from scratch) and as
// Postgres makes it (a copy of the binary's template). The databases are
// dropped when the benchmark ends, outside the timing.
func BenchmarkFreshMigrated(b *testing.B) {
	b.Run("schema+migrate", func(b *testing.B) {
		for b.Loop() {
			url := EmptyPostgres(b)
			if err := sqlstore.Migrate(context.Background(), url); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("template-copy", func(b *testing.B) {
		Postgres(b) // the template
		b.ResetTimer()
		for b.Loop() {
			Postgres(b)
		}
	})
}
