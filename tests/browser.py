"""tests/browser.py — the headless Chromium the browser tests drive (tests/explorer.py, tests/mem_snapshot.py,
tests/trace_json.py): Debian's chromium and chromium-driver through Debian's python3-selenium, the browser's
console kept for the tests to read."""
import shutil


def headless_chromium(label, size="1400,1700"):
    """The driver, or None after a SKIP line (prefixed `label`) saying what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        print(f"SKIP {label}: no browser (Debian's python3-selenium is not installed: bash scripts/setup.sh)")
        return None
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        print(f"SKIP {label}: no browser (chromium and chromium-driver: bash scripts/setup.sh)")
        return None
    o = Options()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={size}"]:
        o.add_argument(a)
    o.binary_location = chrome
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=o)
