#!/usr/bin/env bash
# Screenshot a demo report in a real browser (headless Chromium), to check its layout by eye:
# figures inside the page width, no overlapping labels, long tables collapsed.
#
#   scripts/screenshot_report.sh demo-report/report.html [report.png] [height]
#
# Needs a Chromium or Chrome binary (`apt-get install chromium` is enough; the same binary lets
# kaleido write the .png figures). The page is rendered 1280 px wide and `height` px tall
# (default 9000: the whole demo report); plotly draws its figures with JavaScript, so the
# screenshot waits for a virtual-time budget of 15 s. tests/unit/test_report_page.py runs this
# when a Chromium is installed.
set -euo pipefail

page=${1:?usage: $0 REPORT.html [OUT.png] [HEIGHT]}
out=${2:-${page%.html}.png}
height=${3:-9000}
browser=""
for name in chromium chromium-browser google-chrome chrome; do
    if command -v "$name" >/dev/null 2>&1; then browser=$(command -v "$name"); break; fi
done
if [[ -z "$browser" ]]; then
    echo "no Chromium or Chrome found: apt-get install chromium" >&2
    exit 3
fi
url="file://$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="1280,${height}" --virtual-time-budget=15000 \
    --screenshot="$out" "$url" 2>/dev/null
test -s "$out"
echo "$out"
