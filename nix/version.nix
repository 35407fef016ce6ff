# The workspace version ([workspace.package] in Cargo.toml).
(builtins.fromTOML (builtins.readFile ../Cargo.toml)).workspace.package.version
