package sqlstore

import (
	"context"
	"errors"
	"regexp"
	"strings"
)

// codeMigrations are the migrations written in Go, by dialect: what one
// dialect cannot say in a SQL file. Each has a version of its own among the
// files' and runs, in that order, in a transaction of its own.
var codeMigrations = map[Dialect][]migration{
	SQLite: {{version: 31, name: "0031_phone_numbers_per_tenant (sqlite, in Go)", code: phoneNumbersPerTenantSQLite}},
}

// uniqueNumber is the column definition of phones.number in SQLite's
// stored CREATE TABLE, with its UNIQUE constraint.
var uniqueNumber = regexp.MustCompile(`(?i)\bnumber(\s+)TEXT(\s+)NOT(\s+)NULL(\s+)UNIQUE\b`)

// phoneNumbersPerTenantSQLite is migration 0031 (see its PostgreSQL file)
// on SQLite, where a column's UNIQUE cannot be dropped: the table is made
// again from its own stored definition (so every column any migration added
// is kept, in order) without it, its rows copied, and its indexes made
// again, with the new ones.
func phoneNumbersPerTenantSQLite(ctx context.Context, tx *Tx) error {
	var create string
	if err := tx.queryRow(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'phones'`).Scan(&create); err != nil {
		return err
	}
	if !uniqueNumber.MatchString(create) || !strings.HasPrefix(create, "CREATE TABLE phones ") {
		return errors.New("the phones table is not as migration 0001 made it (number TEXT NOT NULL UNIQUE)")
	}
	create = strings.Replace(uniqueNumber.ReplaceAllString(create, "number${1}TEXT${2}NOT${3}NULL"), "CREATE TABLE phones ", "CREATE TABLE phones_new ", 1)
	rows, err := tx.query(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'phones' AND sql IS NOT NULL`)
	if err != nil {
		return err
	}
	var indexes []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			rows.Close()
			return err
		}
		indexes = append(indexes, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	steps := append([]string{create, `INSERT INTO phones_new SELECT * FROM phones`, `DROP TABLE phones`, `ALTER TABLE phones_new RENAME TO phones`},
		indexes...)
	steps = append(steps,
		`CREATE UNIQUE INDEX phones_tenant_number ON phones (tenant_id, number)`,
		`CREATE UNIQUE INDEX phones_number ON phones (number) WHERE kind <> 'android'`)
	for _, q := range steps {
		if _, err := tx.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
