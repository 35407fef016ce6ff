# STUB: the few nixpkgs `lib` functions odek's Nix files use, with the same
# meaning as the real ones (lib/attrsets.nix, lib/lists.nix, lib/strings.nix,
# lib/licenses.nix). Anything else is missing on purpose: using it fails the
# offline check until it is added here after checking the real definition.
{
  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  optionalAttrs = cond: as: if cond then as else { };
  optionals = cond: xs: if cond then xs else [ ];
  toLower = builtins.replaceStrings
    [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ]
    [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ];
  licenses.asl20 = {
    spdxId = "Apache-2.0";
    shortName = "asl20";
    fullName = "Apache License 2.0";
    free = true;
  };
}
