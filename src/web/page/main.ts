/** The page's entry: renders the app into #app (index.html holds no script of its own). */
import { render } from 'preact'
import { html } from 'htm/preact'
import { App } from './app.js'
import 'uplot/dist/uPlot.min.css'
import './app.css'

render(html`<${App} />`, document.getElementById('app')!)
