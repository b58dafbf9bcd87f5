# The Spark projector image used by compose.yaml.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /strata
COPY . .
RUN bash scripts/setup.sh
ENV PATH="/strata/.venv/bin:${PATH}"
ENTRYPOINT []
