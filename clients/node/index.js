// tokenrelay for Node: authenticated HTTP calls and SSE subscriptions through a tokenrelay process.
export { DEFAULT_MAX_BUFFERED, Relay, Subscription, TIMEOUT_SLACK_MS } from './lib/relay.js';
export { Response, findBinary } from './lib/core.js';
export * from './lib/errors.js';
