module github.com/odek-dev/odek/bench/go

go 1.19

require github.com/odek-dev/odek/bindings/go v0.0.0

replace github.com/odek-dev/odek/bindings/go => ../../bindings/go
