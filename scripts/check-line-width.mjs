// Fails when a tracked source line is longer than 140 characters. Biome's formatter keeps code within
// that width but leaves long strings and comments alone; this holds them to it too.
// The generated protobuf codecs under bench/gen/ are exempt.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

const WIDTH = 140
const SOURCE = /\.(ts|mts|mjs|js|lua|sh|ya?ml)$/
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { encoding: 'utf8' })
  .split('\n')
  .filter((file) => SOURCE.test(file) && !file.startsWith('bench/gen/'))
const long = []
for (const file of files) {
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if ([...line].length > WIDTH) long.push(`${file}:${i + 1}: ${[...line].length} characters`)
    })
}
if (long.length > 0) {
  console.error(`Lines over ${WIDTH} characters:\n${long.join('\n')}`)
  process.exit(1)
}
