// Loaded into every node process of a test run (NODE_OPTIONS) when FLOODGATE_TEST_TIMES names a
// file (scripts/run-tests.mjs sets this up): each test-file process appends one JSON line there as it
// exits, with its start and end times, its own CPU seconds and those of the processes it started and
// waited for (redis-server, workers, npm). Other processes (the workers themselves, npm) write nothing.
const { appendFileSync, readFileSync } = require('node:fs')

const file = process.argv[1] ?? ''
const out = process.env.FLOODGATE_TEST_TIMES
if (out && process.env.NODE_TEST_CONTEXT && file.endsWith('.test.js')) {
  const start = Date.now() - process.uptime() * 1000
  process.on('exit', () => {
    const { user, system } = process.cpuUsage()
    // Of the children it waited for: cutime and cstime, fields 16 and 17 of /proc/self/stat, in clock
    // ticks (100 a second on Linux). Where there is no /proc, they count as none.
    let childCpu = 0
    try {
      const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')
      childCpu = (Number(fields[13]) + Number(fields[14])) / 100
    } catch {
      childCpu = 0
    }
    const end = Date.now()
    const line = { file: file.replace(/^.*\/\.test-build\//, ''), start, end, cpu: (user + system) / 1e6, childCpu }
    appendFileSync(out, `${JSON.stringify(line)}\n`)
  })
}
