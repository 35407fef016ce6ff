# STUB NIXPKGS package set — NOT NIXPKGS; see ./flake.nix and ./README.md.
#
# Each function below mirrors the real nixpkgs function's name and the subset
# of its arguments that odek's Nix files use, WITHOUT `...`: an argument the
# real function does not take (a typo, a removed option) is an "unexpected
# argument" error here. Types and formats are asserted (digests, SRI hashes,
# image names, lists of derivations, NixOS option paths). Derivations are real
# `derivation`s, so `nix flake check --no-build` can instantiate them; their
# builder refuses to run. A package or function missing from this set is a
# missing attribute error: add it only after checking the real nixpkgs.
{ lib, system }:
let
  inherit (builtins) all attrNames elem isAttrs isBool isFunction isInt isList isPath isString match;

  # `assert need what cond msg;` — an assertion with a message.
  need = what: cond: msg: cond || throw "stub-nixpkgs: ${what}: ${msg}";

  isDrv = x: isAttrs x && (x.type or null) == "derivation";
  isSrc = x: isPath x || isDrv x || (isString x && builtins.substring 0 1 x == "/");
  listOf = p: xs: isList xs && all p xs;
  attrsOf = p: as: isAttrs as && all (n: p as.${n}) (attrNames as);
  oneOf = xs: x: elem x xs;
  isStr = isString;
  isOptStr = x: x == null || isString x;
  isSRI = s: isString s && match "sha256-[A-Za-z0-9+/]{43}=" s != null;
  isDigest = s: isString s && match "sha256:[0-9a-f]{64}" s != null;
  # Docker repository names (optionally with a registry host) and tags.
  isImageName = s: isString s
    && match "([a-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*" s != null;
  isImageTag = s: isString s && match "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}" s != null;
  isEnvValue = v: isString v || isBool v || isInt v || isPath v || isDrv v;
  isMeta = m: isAttrs m
    && all (oneOf [ "description" "mainProgram" "license" "homepage" "platforms" ]) (attrNames m)
    && (m ? description -> isString m.description)
    && (m ? mainProgram -> isString m.mainProgram)
    && (m ? license -> isAttrs m.license && m.license ? spdxId);

  goarch = {
    x86_64-linux = "amd64"; aarch64-linux = "arm64";
    x86_64-darwin = "amd64"; aarch64-darwin = "arm64";
  }.${system};

  hostPlatform = {
    inherit system;
    isLinux = match ".*-linux" system != null;
    isDarwin = match ".*-darwin" system != null;
  };

  # A derivation that instantiates but never builds. Attributes that
  # `derivation` can take become its environment (forcing every string,
  # path and derivation in them); `env` is merged in as mkDerivation does.
  mk = name: attrs:
    let
      storable = v: isString v || isPath v || isBool v || isInt v || isDrv v
        || (isList v && all (x: isString x || isPath x || isDrv x) v);
      reserved = [ "name" "system" "builder" "args" "env" "outputs" ];
      kept = lib.genAttrs
        (builtins.filter (n: !(elem n reserved) && attrs.${n} != null && storable attrs.${n}) (attrNames attrs))
        (n: attrs.${n});
    in
    derivation (kept // (attrs.env or { }) // {
      inherit name system;
      builder = "/bin/sh";
      args = [ "-c" "echo 'stub-nixpkgs: ${name} is a stub derivation for offline evaluation; it cannot be built' >&2; exit 1" ];
    });

  # A plain package.
  pkg = name: mk name { } // { pname = name; meta = { }; };

  noGitSources = lockFile:
    all (p: !(p ? source) || builtins.substring 0 9 p.source == "registry+")
      ((builtins.fromTOML (builtins.readFile lockFile)).package or [ ]);

  # ---- rustPlatform -------------------------------------------------------
  buildRustPackage =
    { pname, version, src, cargoLock
    , cargoBuildFlags ? [ ], cargoTestFlags ? [ ], checkFlags ? [ ]
    , nativeBuildInputs ? [ ], buildInputs ? [ ]
    , doCheck ? true, preCheck ? "", buildPhase ? null, installPhase ? null, postInstall ? ""
    , env ? { }, passthru ? { }, meta ? { }
    }@args:
    let what = "rustPlatform.buildRustPackage (${toString pname})"; in
    assert need what (isString pname && isString version) "pname and version must be strings";
    assert need what (isSrc src) "src must be a path or a store path";
    assert need what (isAttrs cargoLock && attrNames cargoLock == [ "lockFile" ])
      "cargoLock must be exactly { lockFile = <path>; } (no git dependencies, so no outputHashes)";
    assert need what (isPath cargoLock.lockFile && builtins.pathExists cargoLock.lockFile)
      "cargoLock.lockFile must be an existing path";
    assert need what (noGitSources cargoLock.lockFile)
      "Cargo.lock has non-registry (git) sources: importCargoLock would need cargoLock.outputHashes";
    assert need what (all (listOf isString) [ cargoBuildFlags cargoTestFlags checkFlags ])
      "cargoBuildFlags, cargoTestFlags and checkFlags must be lists of strings";
    assert need what (listOf isDrv nativeBuildInputs && listOf isDrv buildInputs)
      "nativeBuildInputs and buildInputs must be lists of derivations";
    assert need what (isBool doCheck) "doCheck must be a boolean";
    assert need what (all isString [ preCheck postInstall ] && isOptStr buildPhase && isOptStr installPhase)
      "phases and hooks must be strings";
    assert need what (attrsOf isEnvValue env) "env values must be strings, booleans, integers, paths or derivations";
    assert need what (isMeta meta) "meta has an unknown attribute or a wrong type";
    assert need what (isAttrs passthru) "passthru must be an attribute set";
    mk "${pname}-${version}" (builtins.removeAttrs args [ "cargoLock" "meta" "passthru" ]
      // { cargoLockFile = cargoLock.lockFile; })
    // passthru // { inherit pname version meta; };

  # ---- Go -------------------------------------------------------------------
  buildGoModule =
    { pname, version, src, vendorHash
    , modRoot ? "./", subPackages ? [ ], ldflags ? [ ], tags ? [ ]
    , nativeBuildInputs ? [ ], buildInputs ? [ ]
    , env ? { }, checkFlags ? [ ], preCheck ? "", postInstall ? "", doCheck ? true
    , passthru ? { }, meta ? { }
    }@args:
    let what = "buildGoModule (${toString pname})"; in
    assert need what (isString pname && isString version) "pname and version must be strings";
    assert need what (isSrc src) "src must be a path or a store path";
    assert need what (vendorHash == null || isSRI vendorHash) "vendorHash must be null (no dependencies) or an SRI sha256 hash";
    assert need what (isString modRoot) "modRoot must be a string";
    assert need what (all (listOf isString) [ subPackages ldflags tags checkFlags ]) "flag lists must be lists of strings";
    assert need what (listOf isDrv nativeBuildInputs && listOf isDrv buildInputs)
      "nativeBuildInputs and buildInputs must be lists of derivations";
    assert need what (attrsOf isEnvValue env) "env values must be strings, booleans, integers, paths or derivations";
    assert need what (env ? CGO_ENABLED -> elem env.CGO_ENABLED [ "0" "1" 0 1 ]) "env.CGO_ENABLED must be 0 or 1";
    assert need what (all isString [ preCheck postInstall ] && isBool doCheck) "hooks must be strings, doCheck a boolean";
    assert need what (isMeta meta) "meta has an unknown attribute or a wrong type";
    mk "${pname}-${version}" (builtins.removeAttrs args [ "meta" "passthru" ])
    // passthru // { inherit pname version meta; };

  # ---- Python ---------------------------------------------------------------
  python = mk "python3-3.13" { } // { sitePackages = "lib/python3.13/site-packages"; pythonVersion = "3.13"; };

  buildPythonPackage =
    { pname, version, src, pyproject
    , sourceRoot ? null
    , build-system ? [ ], dependencies ? [ ], nativeCheckInputs ? [ ]
    , checkPhase ? null, preCheck ? "", postInstall ? "", doCheck ? true
    , pythonImportsCheck ? [ ], env ? { }
    , passthru ? { }, meta ? { }
    }@args:
    let what = "python3Packages.buildPythonPackage (${toString pname})"; in
    assert need what (isString pname && isString version) "pname and version must be strings";
    assert need what (isSrc src) "src must be a path or a store path";
    assert need what (pyproject == true) "set pyproject = true (the format argument is legacy)";
    assert need what (isOptStr sourceRoot) "sourceRoot must be a string";
    assert need what (build-system != [ ]) "a pyproject build needs build-system";
    assert need what (all (listOf isDrv) [ build-system dependencies nativeCheckInputs ])
      "build-system, dependencies and nativeCheckInputs must be lists of derivations";
    assert need what (isOptStr checkPhase && all isString [ preCheck postInstall ] && isBool doCheck)
      "hooks must be strings, doCheck a boolean";
    assert need what (listOf isString pythonImportsCheck) "pythonImportsCheck must be a list of module names";
    assert need what (attrsOf isEnvValue env) "env values must be strings, booleans, integers, paths or derivations";
    assert need what (isMeta meta) "meta has an unknown attribute or a wrong type";
    mk "python3.13-${pname}-${version}" (builtins.removeAttrs args [ "meta" "passthru" "pyproject" ])
    // passthru // { inherit pname version meta; };

  python3Packages = {
    inherit python buildPythonPackage;
    setuptools = pkg "python3.13-setuptools";
    setuptools-rust = pkg "python3.13-setuptools-rust";
    wheel = pkg "python3.13-wheel";
    hatchling = pkg "python3.13-hatchling";
    flit-core = pkg "python3.13-flit-core";
    pdm-backend = pkg "python3.13-pdm-backend";
    poetry-core = pkg "python3.13-poetry-core";
    pytest = pkg "python3.13-pytest";
  };

  python3 = python // {
    pkgs = python3Packages;
    withPackages = f:
      let ps = f python3Packages; in
      assert need "python3.withPackages" (listOf isDrv ps) "the function must return a list of derivations";
      mk "python3-3.13-env" { paths = ps; };
  };

  # ---- trivial builders -----------------------------------------------------
  runCommand = name: env: buildCommand:
    let what = "runCommand (${toString name})"; in
    assert need what (isString name) "the name must be a string";
    assert need what (isAttrs env) "the second argument is the environment (an attribute set)";
    assert need what (isString buildCommand) "the build command must be a string";
    assert need what (listOf isDrv (env.nativeBuildInputs or [ ])) "nativeBuildInputs must be a list of derivations";
    mk name (env // { inherit buildCommand; });

  writeShellScriptBin = name: text:
    assert need "writeShellScriptBin" (isString name && isString text) "name and text must be strings";
    mk name { inherit text; };

  writeShellApplication =
    { name, text, runtimeInputs ? [ ], runtimeEnv ? null, meta ? { } }:
    let what = "writeShellApplication (${toString name})"; in
    assert need what (isString name && isString text) "name and text must be strings";
    assert need what (listOf isDrv runtimeInputs) "runtimeInputs must be a list of derivations";
    assert need what (runtimeEnv == null || attrsOf isString runtimeEnv) "runtimeEnv must map names to strings";
    assert need what (isMeta meta) "meta has an unknown attribute or a wrong type";
    mk name ({ inherit text runtimeInputs; } // (if runtimeEnv == null then { } else { runtimeEnvJSON = builtins.toJSON runtimeEnv; }));

  buildEnv =
    { name, paths, pathsToLink ? [ "/" ], ignoreCollisions ? false, extraOutputsToInstall ? [ ], postBuild ? "", meta ? { } }:
    let what = "buildEnv (${toString name})"; in
    assert need what (isString name) "the name must be a string";
    assert need what (listOf isDrv paths) "paths must be a list of derivations";
    assert need what (listOf (p: isString p && builtins.substring 0 1 p == "/") pathsToLink) "pathsToLink must be absolute paths";
    assert need what (isBool ignoreCollisions && listOf isString extraOutputsToInstall && isString postBuild) "wrong type";
    mk name { inherit paths pathsToLink ignoreCollisions postBuild; };

  mkShell =
    { name ? "nix-shell", packages ? [ ], inputsFrom ? [ ], shellHook ? "" }:
    assert need "mkShell" (listOf isDrv packages && listOf isDrv inputsFrom) "packages and inputsFrom must be lists of derivations";
    assert need "mkShell" (isString shellHook) "shellHook must be a string";
    mk name { inherit packages inputsFrom shellHook; };

  # ---- dockerTools ------------------------------------------------------------
  dockerTools = {
    pullImage =
      { imageName, imageDigest
      , hash ? "", sha256 ? ""
      , os ? "linux", arch ? goarch
      , finalImageName ? imageName, finalImageTag ? "latest"
      , tlsVerify ? true
      , name ? builtins.replaceStrings [ "/" ":" ] [ "-" "-" ] "docker-image-${finalImageName}-${finalImageTag}.tar"
      }:
      let what = "dockerTools.pullImage (${toString imageName})"; in
      assert need what (isImageName imageName && isImageName finalImageName) "imageName/finalImageName must be image names";
      assert need what (isDigest imageDigest) "imageDigest must be sha256:<64 lowercase hex>";
      assert need what ((hash != "") != (sha256 != "")) "give exactly one of hash and sha256";
      assert need what (hash == "" || isSRI hash) "hash must be an SRI sha256 hash (sha256-<44 base64>)";
      assert need what (isImageTag finalImageTag) "finalImageTag must be an image tag";
      assert need what (os == "linux" && elem arch [ "amd64" "arm64" "arm" "386" "ppc64le" "s390x" "riscv64" ]) "unsupported os/arch";
      assert need what (isBool tlsVerify) "tlsVerify must be a boolean";
      mk name {
        inherit imageDigest;
        imageName = finalImageName;
        imageTag = finalImageTag;
        sourceURL = "docker://${imageName}@${imageDigest}";
        outputHashMode = "flat";
        outputHashAlgo = "sha256";
        outputHash = if hash != "" then hash else sha256;
      };

    buildLayeredImage =
      { name, tag ? null, contents ? [ ], config ? { }
      , extraCommands ? "", fakeRootCommands ? "", enableFakechroot ? false
      , maxLayers ? 100, created ? "1970-01-01T00:00:01Z", architecture ? goarch
      , fromImage ? null, includeStorePaths ? true, passthru ? { }, meta ? { }
      }:
      let
        what = "dockerTools.buildLayeredImage (${toString name})";
        configKeys = [ "Cmd" "Entrypoint" "Env" "ExposedPorts" "Labels" "User" "WorkingDir" "Volumes" "StopSignal" "Healthcheck" "OnBuild" ];
      in
      assert need what (isImageName name) "name must be an image name";
      assert need what (tag == null || isImageTag tag) "tag must be an image tag";
      assert need what (listOf isDrv (if isList contents then contents else [ contents ])) "contents must be derivations";
      assert need what (isAttrs config && all (oneOf configKeys) (attrNames config)) "config has a key that is not an OCI image config field";
      assert need what (config ? Cmd -> listOf isString config.Cmd) "config.Cmd must be a list of strings";
      assert need what (config ? Env -> listOf (e: isString e && match "[A-Za-z_][A-Za-z0-9_]*=.*" e != null) config.Env) "config.Env must be a list of NAME=value";
      assert need what (config ? Labels -> attrsOf isString config.Labels) "config.Labels must map names to strings";
      assert need what (config ? ExposedPorts -> attrsOf (v: v == { }) config.ExposedPorts
        && all (p: match "[0-9]+/(tcp|udp)" p != null) (attrNames config.ExposedPorts)) "config.ExposedPorts must be { \"<port>/tcp\" = { }; }";
      assert need what (isString extraCommands && isString fakeRootCommands && isBool enableFakechroot) "wrong type";
      assert need what (isInt maxLayers && maxLayers > 1 && maxLayers <= 125) "maxLayers must be 2..125";
      assert need what (fromImage == null || isDrv fromImage) "fromImage must be a derivation";
      mk "${baseNameOf name}.tar.gz" { inherit contents extraCommands; configJSON = builtins.toJSON config; }
      // passthru // { imageName = name; imageTag = tag; };
  };

  # ---- NixOS tests --------------------------------------------------------------
  # The NixOS options odek's VM test sets, with their types. An option that is
  # not listed fails: add it only after checking it exists in NixOS.
  nixosOptions = {
    virtualisation = {
      docker = { enable = isBool; daemon.settings = isAttrs; };
      memorySize = isInt;
      diskSize = isInt;
      cores = isInt;
    };
    environment = {
      systemPackages = listOf isDrv;
      variables = attrsOf isString;
    };
    networking = {
      hosts = attrsOf (listOf isString);
      firewall.enable = isBool;
    };
  };

  checkOptions = path: schema: value:
    if isFunction schema then
      need "NixOS option ${path}" (schema value) "wrong type"
    else
      need "NixOS option ${path}" (isAttrs value) "must be an attribute set"
      && all
        (n: need "NixOS option ${path}.${n}" (schema ? ${n}) "unknown option (not in stub-nixpkgs' list)"
          && checkOptions "${path}.${n}" schema.${n} value.${n})
        (attrNames value);

  runNixOSTest =
    { name, nodes, testScript, globalTimeout ? 3600, skipLint ? false, skipTypeCheck ? false }:
    let
      what = "testers.runNixOSTest (${toString name})";
      nodeConfig = n: m:
        let c = if isFunction m then m { inherit lib; pkgs = self; config = { }; options = { }; modulesPath = "/stub/nixos/modules"; } else m;
        in assert checkOptions "nodes.${n}" nixosOptions c; c;
      configs = builtins.mapAttrs nodeConfig nodes;
      script = if isFunction testScript then testScript { nodes = configs; } else testScript;
      packages = builtins.concatLists (map (n: configs.${n}.environment.systemPackages or [ ]) (attrNames configs));
    in
    assert need what (isString name) "name must be a string";
    assert need what (isAttrs nodes && nodes != { }) "nodes must name at least one machine";
    assert need what (isString script) "testScript must be a string (or a function returning one)";
    assert need what (isInt globalTimeout && isBool skipLint && isBool skipTypeCheck) "wrong type";
    mk "vm-test-run-${name}" { testScript = script; inherit packages; };

  self = {
    inherit lib python3 python3Packages runCommand writeShellScriptBin writeShellApplication
      buildEnv mkShell dockerTools;
    stdenv = { inherit hostPlatform; };
    rustPlatform = { inherit buildRustPackage; };
    inherit buildGoModule;
    testers = { inherit runNixOSTest; };

    callPackage = fn: overrides:
      let f = if isPath fn then import fn else fn;
      in f (builtins.intersectAttrs (builtins.functionArgs f) self // overrides);

    # Plain packages used by odek's Nix files.
    bashInteractive = pkg "bash-interactive";
    coreutils = pkg "coreutils";
    findutils = pkg "findutils";
    gnugrep = pkg "gnugrep";
    gnused = pkg "gnused";
    gawk = pkg "gawk";
    procps = pkg "procps";
    util-linux = pkg "util-linux";
    iproute2 = pkg "iproute2";
    netcat-openbsd = pkg "netcat-openbsd";
    getent = pkg "getent";
    redis = pkg "redis";
    postgresql = pkg "postgresql";
    busybox = pkg "busybox";
    jq = pkg "jq";
    curl = pkg "curl";
    shellcheck = pkg "shellcheck";
    cargo = pkg "cargo";
    rustc = pkg "rustc";
    clippy = pkg "clippy";
    rustfmt = pkg "rustfmt";
    go = pkg "go";
    pkg-config = pkg "pkg-config-wrapper";
    installShellFiles = pkg "install-shell-files";
    docker-client = pkg "docker-client";
    docker-compose = pkg "docker-compose";
    docker-distribution = pkg "docker-distribution";
  };
in
self
