// Stand-in for the host's `refract:plugin/host` import in native tests: records every log line in
// `logs` as [level, message].
export const logs = [];

export function log(level, message) {
  logs.push([level, message]);
}
