#!/usr/bin/env bash
# Every C file follows the committed .clang-format (house style). Skips
# (77) where clang-format is not installed.
set -u
root=${1:?usage: format_check.sh SOURCE_DIR}
command -v clang-format >/dev/null || { echo "SKIP: no clang-format"; exit 77; }
cd "$root" || exit 1
bad=0
while IFS= read -r f; do
        if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
                echo "not formatted: $f (clang-format -i $f)"
                bad=1
        fi
done < <(find base nn gossip node tools tests -name '*.[ch]' | sort)
[ $bad -eq 0 ] && echo "format: all C files match .clang-format"
exit $bad
