module github.com/odek-dev/odek/bindings/go

go 1.19
