// The rules of upstream's test/integration basic config (its keys, limits and replaces), plus one of
// Floodgate's own `limits:`: shared by integration.test.ts and integration-deployment.test.ts.

export const RULES = `
domain: basic
descriptors:
  - key: key1
    rate_limit: { unit: day, requests_per_unit: 50 }
  - key: key2
    rate_limit: { unit: day, requests_per_unit: 20 }
  - key: key3
    rate_limit: { unit: day, requests_per_unit: 10 }
  - key: key4
    rate_limit: { unit: day, requests_per_unit: 15 }
  - key: key5
    rate_limit: { unit: day, requests_per_unit: 14 }
  - key: quota
    rate_limit: { unit: day, requests_per_unit: 3 }
  - key: deny_all
    rate_limit: { unit: day, requests_per_unit: 0 }
  - key: foo
    rate_limit: { name: foo_limit, unit: day, requests_per_unit: 1 }
  - key: bar
    rate_limit: { unit: day, requests_per_unit: 2, replaces: [{ name: foo_limit }] }
  - key: baz
    rate_limit: { unlimited: true, replaces: [{ name: foo_limit }] }
  - key: unspec
    detailed_metric: true
    rate_limit: { unit: day, requests_per_unit: 2 }
  - key: floodgate
    limits:
      - { name: fg, algorithm: fixed-window, limit: 1, period: 1d }
`
