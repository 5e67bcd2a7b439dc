"""What several method families share: routing a call's handles, rows, creation, reading
and waiting, report validation, the common context base. Family modules import from here,
never from each other."""
