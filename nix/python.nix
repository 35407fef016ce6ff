# packages.<system>.odek-python: the Python package `odek` (bindings/python,
# ctypes over libodek). setup.py normally builds libodek with cargo
# (setuptools-rust); here ODEK_PREBUILT_LIBODEK hands it the libodek
# derivation's library instead, which it bundles as odek/libodek.so — where
# the package looks first — so libodek is built once, by ./libodek.nix.
#
# The build backend is read from bindings/python/pyproject.toml
# ([build-system] requires); setuptools when the file does not exist yet.
# pytest runs the binding tests with `-m "not docker"`: the real-Docker tier
# (marker `docker`, declared in pyproject.toml) fails rather than skips without
# a daemon, and there is none in the Nix build sandbox; nor the fake-engine
# tier (marker `fake`): the libodek derivation is a release build, without
# the `testing` feature that carries the fake engine. The header tests read
# ffi/include/odek.h, which is part of the source. Deselected too: the test of
# the development fallback (a libodek.so under the workspace's target/), a
# layout the Nix build does not have.
{ lib, python3Packages, libodek }:
let
  source = import ./source.nix;
  pyproject = ../bindings/python/pyproject.toml;
  requires =
    if builtins.pathExists pyproject
    then (builtins.fromTOML (builtins.readFile pyproject)).build-system.requires or [ "setuptools" ]
    else [ "setuptools" ];
  # "setuptools>=68" / "flit_core >=3.2,<4" -> python3Packages.setuptools / .flit-core
  packageOf = req:
    let
      name = builtins.head (builtins.match "[[:space:]]*([A-Za-z0-9._-]+).*" req);
      attr = builtins.replaceStrings [ "_" "." ] [ "-" "-" ] (lib.toLower name);
    in
    python3Packages.${attr};
in
python3Packages.buildPythonPackage {
  pname = "odek";
  version = import ./version.nix;
  pyproject = true;
  src = source.python;
  sourceRoot = "source/bindings/python";

  build-system = map packageOf requires;
  nativeCheckInputs = [ python3Packages.pytest ];

  env.ODEK_PREBUILT_LIBODEK = "${libodek}/lib/libodek.so";

  preCheck = ''
    export ODEK_LIB=${libodek}/lib/libodek.so
  '';
  checkPhase = ''
    runHook preCheck
    python -m pytest -m "not docker and not fake" \
      -k "not test_development_fallback_finds_the_workspace_build" tests
    runHook postCheck
  '';

  pythonImportsCheck = [ "odek" ];

  meta = {
    description = "Python bindings for odek (ctypes over libodek)";
    license = lib.licenses.asl20;
  };
}
