#!/usr/bin/env python3
"""Counts passed and failed test cases for tools/test.

Arguments: a `bazel test` log and the bazel-testlogs directory. For every
test target the log reports on (PASSED, FAILED, TIMEOUT, FLAKY, NO STATUS,
FAILED TO BUILD), reads its test.xml and counts <testcase> elements; a
target without a usable test.xml counts as one case, passed or failed by its
status. Prints "PASSED FAILED".
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

STATUS = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE)\b")


def count_xml(path):
    passed = failed = 0
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("status", "run") == "run" and case.find("skipped") is None:
            passed += 1
    return passed, failed


def main():
    log, testlogs = sys.argv[1], sys.argv[2]
    passed = failed = 0
    with open(log, errors="replace") as f:
        for line in f:
            m = STATUS.match(line.strip())
            if not m:
                continue
            label, status = m.group(1), m.group(2)
            ok = status == "PASSED"
            pkg, _, name = label[2:].partition(":")
            xml = os.path.join(testlogs, pkg, name, "test.xml")
            p = fl = 0
            if os.path.exists(xml):
                try:
                    p, fl = count_xml(xml)
                except ET.ParseError:
                    p = fl = 0
            if ok and fl == 0 and p == 0:
                p = 1
            if not ok and fl == 0:
                fl = 1  # crashed, timed out, or did not build
            passed += p
            failed += fl
    print(passed, failed)


if __name__ == "__main__":
    main()
