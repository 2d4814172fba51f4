#!/usr/bin/env bash
# Refreshes docs/img/dashboard-*.png: the browser test that renders the main pages of the dashboard
# (tests/web/test_e2e.py::test_screenshots_of_the_main_pages) over a freshly seeded store, at a
# desktop width, with CAIRN_UPDATE_SCREENSHOTS=1 so it writes into docs/img instead of a temp dir.
# Needs chromium (scripts/setup_browser.sh) and the dev dependencies (make setup).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_browser.sh >/dev/null
CAIRN_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest -q \
  "tests/web/test_e2e.py::test_screenshots_of_the_main_pages"
ls -l docs/img/dashboard-*.png
