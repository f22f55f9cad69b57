// A TypeDoc plugin for docs/api/: names each module as users import it (`floodgate/express`, not
// `express`), and gives it the one-line summary its entry file opens with, so the sources need no
// TypeDoc tags.
import { readFileSync } from 'node:fs'
import { Comment, Converter, ReflectionKind } from 'typedoc'

export function load(app) {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    for (const module of context.project.getReflectionsByKind(ReflectionKind.Module)) {
      // The entry files of typedoc.json: src/index.ts is "index", src/http/index.ts "http", the rest src/<name>.ts.
      const file = new URL(`src/${module.name === 'http' ? 'http/index' : module.name}.ts`, import.meta.url)
      module.name = module.name === 'index' ? 'floodgate' : `floodgate/${module.name}`
      if (module.comment === undefined) {
        const lines = readFileSync(file, 'utf8').split('\n')
        const opening = lines.slice(
          0,
          lines.findIndex((line) => !line.startsWith('//')),
        )
        const summary = opening.map((line) => line.replace(/^\/\/ ?/, '')).join(' ')
        if (summary !== '') module.comment = new Comment([{ kind: 'text', text: summary }])
      }
    }
  })
}
