/**
 * One line for a flood, every event counted: the finding was a refused-socket log that reset its
 * count at each line and so lost the sockets refused after the last line of a flood.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createLogWindows } from '../../src/log/index.js'
import { timed, waitFor } from '../support/index.js'

test('the first event at once, the rest summed up per window with their samples; the tail of a flood is summed up too, and by close', timed(10_000, async () => {
  const lines: Array<[string, string, number | string, string[]?]> = []
  const w = createLogWindows<string, { n: number }>(50, {
    first: (key, e) => lines.push(['first', key, e.n]),
    summary: (key, count, samples) => lines.push(['summary', key, count, samples])
  }, 2)
  for (let n = 0; n < 5; n++) w.note('a', { n }, `s${n % 3}`)
  w.note('b', { n: 9 }, 'x')
  assert.equal(lines, [['first', 'a', 0], ['first', 'b', 9]])
  // The flood's tail: summed up when its window ends, with at most two samples.
  await waitFor(() => lines.length === 3, 5000, 'the summary of a')
  assert.equal(lines[2], ['summary', 'a', 4, ['s1', 's2']])
  // A quiet window ends the flood: the next event is a first again.
  await waitFor(() => !w.flooding('a'), 5000, 'the flood of a over')
  w.note('a', { n: 7 }, 's')
  w.note('a', { n: 8 }, 's')
  assert.equal(lines.slice(3), [['first', 'a', 7]])
  w.close()
  assert.equal(lines.slice(4), [['summary', 'a', 1, ['s']]], 'close sums up what is counted')
}))

test.run()
