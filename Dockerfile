# The fake (and, in the "test" stage, the e2e suite) in a container.
#   docker compose up fake-lucy            the fake on 127.0.0.1:8787 with docker/seed.json
#   docker compose --profile e2e run e2e   the e2e suite against it
#   docker build -t fake-lucy . && docker run -p 127.0.0.1:8787:8787 -e FAKE_LUCY_ADMIN_TOKEN=… fake-lucy
#                                          the same fake alone (the last stage is the server's image)
FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 UV_LINK_MODE=copy UV_PROJECT_ENVIRONMENT=/opt/venv
RUN pip install --no-cache-dir "uv==0.13.8"
WORKDIR /app
# The locked dependencies in their own layer: a change to the source does not reinstall them.
# (uv needs every workspace member's pyproject.toml to resolve: client/ is the lucy-memory SDK.)
COPY pyproject.toml uv.lock ./
COPY client/pyproject.toml ./client/
RUN uv sync --frozen --no-dev --no-install-workspace
COPY README.md ./
COPY contracts ./contracts
COPY schemas ./schemas
COPY fake_lucy ./fake_lucy
COPY client ./client
RUN uv sync --frozen --no-dev
# The built-in tokens are refused off loopback, and the fake listens on 0.0.0.0 here: the seed's
# tokens serve v1, and the control API needs FAKE_LUCY_ADMIN_TOKEN (compose sets both).
COPY docker/seed.json ./docker/seed.json
# The fake runs as an unprivileged user that owns only its data directory (the code stays root's).
RUN useradd --system --uid 10001 --no-create-home --home-dir /data --shell /usr/sbin/nologin lucy \
 && mkdir -p /data && chown lucy:lucy /data
ENV PATH="/opt/venv/bin:$PATH" \
    FAKE_LUCY_HOST=0.0.0.0 \
    FAKE_LUCY_PORT=8787 \
    FAKE_LUCY_DATABASE=/data/fake-lucy.sqlite3 \
    FAKE_LUCY_SEED=/app/docker/seed.json
VOLUME ["/data"]
EXPOSE 8787
USER lucy
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
  CMD ["python", "-m", "fake_lucy.healthcheck"]
CMD ["fake-lucy", "serve"]

FROM runtime AS test
USER root
RUN uv sync --frozen --group dev --no-install-workspace
COPY tests ./tests
COPY e2e ./e2e
RUN uv sync --frozen --group dev && chown lucy /app
USER lucy
# A fake the suite starts itself (no LUCY_E2E_BASE_URL) listens on loopback, where the built-in
# tokens it uses are accepted; this container serves nothing of its own to probe. The suite's
# clients reach the fake on loopback, never through a proxy Docker passes in (set after the RUNs
# above, which a build's own NO_PROXY still governs).
ENV FAKE_LUCY_HOST=127.0.0.1 \
    NO_PROXY=127.0.0.1,localhost \
    no_proxy=127.0.0.1,localhost
HEALTHCHECK NONE
CMD ["pytest", "-W", "error", "e2e"]

# The default target (`docker build .` without --target): the server's image, as "runtime" is.
FROM runtime AS server
