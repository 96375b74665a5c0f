module github.com/switchboard/switchboard/client

go 1.24
