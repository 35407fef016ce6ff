# Validates flake.lock's structure against flake.nix's inputs, offline (used
# by nix/check-offline.sh). Evaluates to true or throws with the reason.
#   nix-instantiate --eval --strict nix/check-lock.nix --arg root ./.
# Checks: lock version 7; root node "root" whose inputs are exactly flake.nix's
# (nixpkgs only) and point to existing nodes; no other nodes; each input a
# github node whose `original` matches flake.nix's `github:<owner>/<repo>/<ref>`
# URL and whose `locked` entry has a 40-hex rev, an SRI sha256 narHash and an
# integer lastModified.
{ root }:
let
  inherit (builtins) all attrNames fromJSON isInt isString match readFile sort;
  fail = msg: throw "flake.lock: ${msg}";
  check = cond: msg: if cond then true else fail msg;

  lock = fromJSON (readFile (root + "/flake.lock"));
  flake = import (root + "/flake.nix");
  inputs = flake.inputs or { };
  nodes = lock.nodes or (fail "no nodes");
  rootNode = nodes.${lock.root or (fail "no root")} or (fail "the root node is missing");
  rootInputs = rootNode.inputs or { };

  checkInput = name:
    let
      url = inputs.${name}.url or (fail "flake.nix input ${name} has no url");
      m = match "github:([^/]+)/([^/]+)/([^/?]+)" url;
      nodeName = rootInputs.${name};
      node = nodes.${nodeName} or (fail "input ${name} points to missing node ${toString nodeName}");
      locked = node.locked or (fail "node ${nodeName} has no locked entry");
      original = node.original or (fail "node ${nodeName} has no original entry");
    in
    check (m != null) "flake.nix input ${name} is not a github:<owner>/<repo>/<ref> URL (the check knows only those)"
    && check (isString nodeName) "input ${name} must name a node"
    && check (original == { type = "github"; owner = builtins.elemAt m 0; repo = builtins.elemAt m 1; ref = builtins.elemAt m 2; })
      "node ${nodeName}'s original ${builtins.toJSON original} does not match flake.nix's ${url}"
    && check (sort builtins.lessThan (attrNames locked) == [ "lastModified" "narHash" "owner" "repo" "rev" "type" ])
      "node ${nodeName}'s locked entry must have exactly type, owner, repo, rev, narHash, lastModified"
    && check (locked.type == "github" && locked.owner == original.owner && locked.repo == original.repo)
      "node ${nodeName} is locked to another repository than its original"
    && check (isString locked.rev && match "[0-9a-f]{40}" locked.rev != null) "node ${nodeName}: rev must be 40 lowercase hex"
    && check (isString locked.narHash && match "sha256-[A-Za-z0-9+/]{43}=" locked.narHash != null)
      "node ${nodeName}: narHash must be an SRI sha256 hash"
    && check (isInt locked.lastModified && locked.lastModified > 0) "node ${nodeName}: lastModified must be a positive integer";
in
check ((lock.version or null) == 7) "version must be 7"
&& check (lock.root or null == "root") "root must be \"root\""
&& check (sort builtins.lessThan (attrNames rootInputs) == sort builtins.lessThan (attrNames inputs))
  "the root node's inputs (${toString (attrNames rootInputs)}) differ from flake.nix's (${toString (attrNames inputs)})"
&& check (sort builtins.lessThan (attrNames nodes) == sort builtins.lessThan ([ "root" ] ++ map (n: rootInputs.${n}) (attrNames rootInputs)))
  "nodes other than root and the inputs' nodes: ${toString (attrNames nodes)}"
&& all checkInput (attrNames inputs)
