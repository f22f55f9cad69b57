// Types for the Express 4 test dependency (`express4` = npm:express@4): its API as the adapter uses it is Express 5's.

declare module 'express4' {
  import express from 'express'
  export default express
}
