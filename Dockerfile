# The fake (and, in the "test" stage, the e2e suite) in a container.
#   docker compose up fake-lucy            the fake on 127.0.0.1:8787 with docker/seed.json
#   docker compose --profile e2e run e2e   the e2e suite against it
FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 UV_LINK_MODE=copy UV_PROJECT_ENVIRONMENT=/opt/venv
RUN pip install --no-cache-dir "uv==0.13.8"
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
COPY contracts ./contracts
COPY schemas ./schemas
COPY fake_lucy ./fake_lucy
COPY client ./client
RUN uv sync --frozen --no-dev
ENV PATH="/opt/venv/bin:$PATH" \
    FAKE_LUCY_HOST=0.0.0.0 \
    FAKE_LUCY_PORT=8787 \
    FAKE_LUCY_DATABASE=/data/fake-lucy.sqlite3
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=2)"]
CMD ["fake-lucy", "serve"]

FROM runtime AS test
COPY tests ./tests
COPY e2e ./e2e
RUN uv sync --frozen --group dev
CMD ["pytest", "-W", "error", "e2e"]
