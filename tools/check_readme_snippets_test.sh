#!/bin/sh
# tools/check_readme_snippets on a small made-up repository: a good tree passes, and each
# rule, broken once, makes it fail with its own message.
#   $1: tools/check_readme_snippets
set -u
checker="$1"
root=$(mktemp -d /tmp/dlock-snippets-XXXXXX) || exit 1
trap 'rm -rf "$root"' EXIT
failures=0

good_tree() {
  rm -rf "$root"/* "$root"/.ci
  mkdir -p "$root/tools" "$root/docs" "$root/.ci" "$root/cli" "$root/pkg"
  cp "$checker" "$root/tools/check_readme_snippets"
  printf '#!/bin/sh\n' > "$root/tools/demo"; printf '#!/bin/sh\n' > "$root/tools/test"
  chmod +x "$root/tools/demo" "$root/tools/test"
  printf 'tools/setup\ntools/test 2>&1\n' > "$root/.ci/run"
  printf 'if (sub == "run") {}\nABSL_FLAG(absl::Duration, ttl, 1, "");\n' > "$root/cli/main.cc"
  printf 'cc_binary(\n    name = "hello",\n)\n' > "$root/pkg/BUILD"
  printf 'int main() {\n  return 0;\n}\n' > "$root/pkg/hello.cc"
  printf 'a\n// SNIPPET BEGIN two\nb\nc\n// SNIPPET END\nd\n' > "$root/pkg/region.cc"
  cat > "$root/README.md" <<'MD'
# x

<!-- commands -->
```sh
tools/demo   # the demo
tools/test   # the tests
```

<!-- snippet: pkg/hello.cc lines 2-2 -->
```cpp
  return 0;
```

<!-- snippet: pkg/region.cc region two -->
```cpp
b
c
```

See [the page](docs/page.md#a-heading).
MD
  cat > "$root/docs/page.md" <<'MD'
# Page

## A heading

<!-- snippet: pkg/hello.cc -->
```cpp
int main() {
  return 0;
}
```

<!-- commands -->
```sh
bazel run //pkg:hello -- --anything
dlock run --ttl 3s r -- ./mine.sh
```

<!-- illustrative: a sample of some output -->
```
whatever
```
MD
}

# expect NAME RC PATTERN: runs the checker on the tree; its exit status must be RC and, when
# PATTERN is given, its output must contain PATTERN.
expect() {
  out=$("$root/tools/check_readme_snippets" 2>&1); rc=$?
  if [ "$rc" -ne "$2" ] || { [ -n "$3" ] && ! printf '%s\n' "$out" | grep -qF -- "$3"; }; then
    echo "FAIL $1: exit $rc (want $2), want output containing '$3'; got:"; printf '%s\n' "$out"
    failures=$((failures + 1))
  else
    echo "ok   $1"
  fi
}

good_tree; expect "a good tree passes" 0 "0 problem(s)"

good_tree; sed -i 's/  return 0;/  return 1;/' "$root/README.md"
expect "a snippet that differs" 1 "snippet pkg/hello.cc lines 2-2 differs"

good_tree; sed -i '0,/^c$/s//C/' "$root/README.md"
expect "a region snippet that differs" 1 "snippet pkg/region.cc lines 3-4 differs"

good_tree; sed -i 's/region two -->/region three -->/' "$root/README.md"
expect "a region that does not exist" 1 "no SNIPPET BEGIN three"

good_tree; printf '\n```cpp\nint x;\n```\n' >> "$root/docs/page.md"
expect "a block without a marker" 1 "block without a marker"

good_tree; sed -i 's/a sample of some output/sample/' "$root/docs/page.md"
expect "an illustrative block without a real reason" 1 "give a reason"

good_tree; i=0; while [ $i -lt 250 ]; do echo "line" >> "$root/README.md"; i=$((i + 1)); done
expect "README over 250 lines" 1 "at most 250"

good_tree; sed -i 's|^tools/test   # the tests|tools/demo   # twice|' "$root/README.md"
expect "README's first block without tools/test" 1 "must hold the command \`tools/test\`"

good_tree; printf 'tools/setup\n' > "$root/.ci/run"
expect ".ci/run no longer runs tools/test" 1 ".ci/run no longer runs tools/test"

good_tree; sed -i 's|//pkg:hello|//pkg:bye|' "$root/docs/page.md"
expect "a bazel target that does not exist" 1 "target //pkg:bye is not defined"

good_tree; sed -i 's|--ttl 3s|--tll 3s|' "$root/docs/page.md"
expect "a dlock flag that does not exist" 1 "no flag --tll"

good_tree; sed -i 's|dlock run|dlock runn|' "$root/docs/page.md"
expect "a dlock subcommand that does not exist" 1 "dlock runn: no such subcommand"

good_tree; sed -i 's|-- ./mine.sh|-- nosuchprogram|' "$root/docs/page.md"
expect "an unknown program after dlock run's --" 1 "command nosuchprogram"

good_tree; sed -i 's|docs/page.md#a-heading|docs/paeg.md|' "$root/README.md"
expect "a link to a missing page" 1 "no such file"

good_tree; sed -i 's|#a-heading|#b-heading|' "$root/README.md"
expect "a link to a missing heading" 1 "no such heading there"

# --fix rewrites a drifted snippet from its file, and the tree passes again.
good_tree; cp "$root/README.md" "$root/want.md"; sed -i 's/  return 0;/  return 1;/' "$root/README.md"
"$root/tools/check_readme_snippets" --fix >/dev/null
if cmp -s "$root/README.md" "$root/want.md"; then echo "ok   --fix restores the snippet"
else echo "FAIL --fix did not restore the snippet"; diff "$root/want.md" "$root/README.md"
  failures=$((failures + 1)); fi
expect "after --fix" 0 "0 problem(s)"

[ "$failures" -eq 0 ] && echo "PASS" || { echo "$failures case(s) failed"; exit 1; }
