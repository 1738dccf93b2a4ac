"""Smoke test of a running MemAudit: log in as the demo analyst, check the dashboard renders.

Usage: python tests/browser/smoke.py BASE_URL CREDENTIALS_FILE   (run by .ci/smoke)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.browser.chrome import make_driver  # noqa: E402


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
        form = driver.find_element(By.TAG_NAME, "form")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # The login page has an <h1> too: wait for it to be gone before reading the next page's
        # (reading at once raced the navigation and found no element).
        try:
            WebDriverWait(driver, 30).until(EC.staleness_of(form))
            heading = WebDriverWait(driver, 30).until(
                EC.visibility_of_element_located((By.CSS_SELECTOR, "h1"))).text
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
