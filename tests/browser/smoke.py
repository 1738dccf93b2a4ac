"""Smoke test of a running MemAudit: log in as the demo analyst, check the dashboard renders.

Usage: python tests/browser/smoke.py BASE_URL CREDENTIALS_FILE   (run by .ci/smoke)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from selenium.common.exceptions import TimeoutException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.browser.chrome import make_driver  # noqa: E402


def _heading_after_login(driver) -> str | bool:
    """The page's <h1> text once the browser has left the login page; False until then."""
    try:
        if "/login" in driver.current_url:
            return False
        found = driver.find_elements(By.CSS_SELECTOR, "h1")
        return found[0].text if found else False
    except WebDriverException:  # the document changed under the lookup: poll again
        return False


def main(base: str, credentials: str) -> int:
    creds = {line.split()[0]: line.split()[1] for line in Path(credentials).read_text().splitlines() if line.strip()}
    driver = make_driver()
    try:
        for _ in range(60):  # the server may still be starting its workers: reload until the form is there
            driver.get(f"{base}/login/")
            if driver.find_elements(By.NAME, "username"):
                break
            time.sleep(1)
        driver.find_element(By.NAME, "username").send_keys("analyst")
        driver.find_element(By.NAME, "password").send_keys(creds["analyst"])
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # The login page has an <h1> too, and an element of the page being left raises mid-
        # navigation: read the heading only once the browser is off the login page, by polling.
        try:
            heading = WebDriverWait(driver, 30).until(_heading_after_login)
        except TimeoutException:
            print(f"smoke: FAILED, still on {driver.current_url} 30 s after logging in")
            return 1
        Path("artifacts").mkdir(exist_ok=True)
        driver.save_screenshot("artifacts/smoke-dashboard.png")
        if "Dashboard" not in heading or driver.current_url.rstrip("/") != base.rstrip("/"):
            print(f"smoke: FAILED, landed on {driver.current_url} with heading {heading!r}")
            return 1
        print(f"smoke: OK, logged in as the demo analyst, dashboard heading {heading!r}")
        print("1 passed, 0 failed")
        return 0
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
