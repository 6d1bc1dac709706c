# Sourced by the GPU scripts here. patch_into DIR DIFF...: diffs in the catalog's format (a header, a line "---",
# then paths a/src/LIB/... or a/LIB/...) onto packages installed under DIR (a --target dir or a site-packages); one
# line "DIR: DIFF does not apply" each on stderr where one does not.
patch_into() {
  local dir=$1 diff; shift
  for diff in "$@"; do
    sed '1,/^---$/d' "$diff" | sed -E 's#^(---|\+\+\+) (a|b)/src/#\1 \2/#' | patch -s -t -N -r - -p1 -d "$dir" >&2 \
      || echo "$dir: $diff does not apply" >&2
  done
}
