#!/usr/bin/env python3
"""bench/footprint_map.py: what a GNU ld link kept, per package, from its map.

    bench/footprint_map.py LINK.map [--title T] [--target BYTES] [--top N] [--objects]

Reads the map written by `-Wl,-Map=LINK.map` (with --gc-sections, the map's
memory map lists only the input sections the linker kept) and sums the
sizes of kept input sections per origin: dlock objects by package (from the
object's name, `<package>_<file>.o`, as bench/footprint names them:
transport, lock, watchdog, redlock; lock/retry_*.o counted as
"lock (retry)"), Abseil, libstdc++, libc/libm/libgcc and the rest. Prints
.text (code) and read-only data, the dlock total against --target, and the
--top largest kept dlock functions; with --objects, also the .text kept of
each dlock object file (largest first).
"""
import collections
import re
import sys


def origin(path):
    m = re.search(r"(?:^|/|\()(transport|lock|watchdog|redlock)_([A-Za-z0-9_]+)(?:\.cc)?\.o\)?$", path)
    if m:
        pkg, name = m.group(1), m.group(2)
        if pkg == "lock" and name.startswith("retry_"):
            return "dlock", "lock (retry)"
        return "dlock", pkg
    if "libabsl_" in path:
        return "other", "Abseil"
    if "libstdc++" in path or "libsupc++" in path:
        return "other", "libstdc++"
    if re.search(r"lib(c|m|gcc|gcc_eh|pthread)\.a|crt\w*\.o", path):
        return "other", "libc/libgcc"
    if "probe" in path:
        return "other", "probe (main, stand-ins)"
    return "other", "other"


def kind(section):
    if section.startswith(".text"):
        return "text"
    if section.startswith((".rodata", ".data.rel.ro")):
        return "rodata"
    return None


def parse(path):
    """Yields (section, size, file) for every kept input section."""
    lines = open(path, errors="replace").read().split("\n")
    try:
        start = next(i for i, l in enumerate(lines) if l.startswith("Linker script and memory map"))
    except StopIteration:
        start = 0
    pending = None
    entry = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
    for line in lines[start:]:
        if line.startswith(" ") and not line.startswith("  "):
            # " .section  [0xaddr 0xsize file]"
            parts = line.split()
            if len(parts) >= 4 and parts[1].startswith("0x") and parts[2].startswith("0x"):
                yield parts[0], int(parts[2], 16), " ".join(parts[3:])
                pending = None
            elif len(parts) == 1:
                pending = parts[0]
            else:
                pending = None
            continue
        if pending:
            m = entry.match(line)
            if m:
                yield pending, int(m.group(2), 16), m.group(3)
            pending = None


def main(argv):
    title, target, top, args, objects = "", None, 15, [], False
    i = 1
    while i < len(argv):
        if argv[i] == "--title":
            title, i = argv[i + 1], i + 2
        elif argv[i] == "--target":
            target, i = int(argv[i + 1]), i + 2
        elif argv[i] == "--top":
            top, i = int(argv[i + 1]), i + 2
        elif argv[i] == "--objects":
            objects, i = True, i + 1
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    sums = collections.defaultdict(lambda: collections.Counter())
    funcs = collections.Counter()
    per_object = collections.Counter()
    for section, size, path in parse(args[0]):
        k = kind(section)
        if k is None or size == 0:
            continue
        group, name = origin(path)
        sums[(group, name)][k] += size
        if group == "dlock" and k == "text" and section.startswith(".text."):
            funcs[section[len(".text."):]] += size
        if group == "dlock" and k == "text":
            per_object[re.sub(r"^.*[(/]", "", path).rstrip(")")] += size
    dlock = sorted(((n, c) for (g, n), c in sums.items() if g == "dlock"), key=lambda x: -x[1]["text"])
    other = sorted(((n, c) for (g, n), c in sums.items() if g != "dlock"), key=lambda x: -x[1]["text"])
    total_text = sum(c["text"] for _, c in dlock)
    total_ro = sum(c["rodata"] for _, c in dlock)
    print(title)
    print()
    print("| linked from | .text bytes | read-only data bytes |")
    print("|---|---|---|")
    for n, c in dlock:
        print(f"| dlock {n} | {c['text']:,} | {c['rodata']:,} |")
    verdict = ""
    if target:
        verdict = f" (goal <= {target // 1024} KB: {'met' if total_text <= target else 'NOT met'})"
    print(f"| **dlock total** | **{total_text:,}** ({total_text / 1024:.1f} KiB){verdict} | {total_ro:,} |")
    for n, c in other:
        print(f"| {n} | {c['text']:,} | {c['rodata']:,} |")
    if objects and per_object:
        print()
        print("| dlock object | .text bytes kept |")
        print("|---|---|")
        for name, size in per_object.most_common():
            print(f"| {name} | {size:,} |")
    if top > 0 and funcs:
        names = list(funcs)
        demangled = {}
        try:
            import subprocess
            out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                                 text=True).stdout.split("\n")
            demangled = dict(zip(names, out))
        except OSError:
            pass
        print()
        print(f"Largest kept dlock functions (bytes):")
        for name, size in funcs.most_common(top):
            print(f"{size:7d}  {demangled.get(name, name)[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
