# contextwarden proxy as a container image (see docs/deploy.md).
#   docker build -t contextwarden-proxy .
#   docker run -p 8787:8787 -v cw-data:/data -e CONTEXTWARDEN_PROXY_TOKEN=... \
#     contextwarden-proxy --upstream https://api.anthropic.com --workers 2
# Built from this checkout; the summary cache and conversation logs live in /data (a volume),
# or in Redis with --cache redis --redis-url redis://HOST:6379/0.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CONTEXTWARDEN_DATA_DIR=/data

WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip install --disable-pip-version-check '.[proxy,redis]' \
    && useradd --create-home --uid 10001 cw \
    && mkdir -p /data && chown cw /data

USER cw
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8787
ENTRYPOINT ["contextwarden", "proxy", "--host", "0.0.0.0", "--port", "8787"]
CMD ["--help"]
