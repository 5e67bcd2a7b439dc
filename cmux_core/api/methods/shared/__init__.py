"""What several method families share: routing a call's handles, rows, creation, reading and
waiting, report validation. Family modules import from here, never from each other."""
